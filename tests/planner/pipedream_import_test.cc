// The graph.txt importer on small inline profiles: units, multi-output sums,
// DAG inputs and order, Input / __getitem__ layers, and errors with line numbers.
#include "tests/catch_compat.h"

#include <string>

#include "planner/pipedream_import.h"
#include "planner/pipedream_states.h"

using namespace baton;

namespace {

std::string node(const std::string& id, const std::string& description, double f, double b,
                 const std::string& activation, double params) {
  return id + " -- " + description + " -- forward_compute_time=" + std::to_string(f) +
         ", backward_compute_time=" + std::to_string(b) + ", activation_size=" + activation +
         ", parameter_size=" + std::to_string(params) + "\n";
}

std::string edge(const std::string& from, const std::string& to) { return "\t" + from + " -- " + to + "\n"; }

Profile import_ok(const std::string& text) {
  auto profile = import_pipedream_graph(text, "test/graph.txt");
  INFO((profile ? std::string() : profile.error().message));
  REQUIRE(profile.ok());
  return *profile;
}

std::string import_error(const std::string& text) {
  auto profile = import_pipedream_graph(text, "test/graph.txt");
  REQUIRE_FALSE(profile.ok());
  return profile.error().message;
}

}  // namespace

TEST_CASE("import converts milliseconds to seconds and keeps bytes", "[planner][pipedream][import]") {
  const Profile p = import_ok(node("node1", "Conv2d(3, 64)", 2.5, 4.0, "1024.000", 2048.0));
  REQUIRE(p.num_layers() == 1);
  const Layer& layer = p.layers[0];
  CHECK(layer.name == "node1");
  CHECK(layer.description == "Conv2d(3, 64)");
  CHECK(layer.forward.value == Approx(2.5e-3).epsilon(1e-12));
  CHECK(layer.backward.value == Approx(4.0e-3).epsilon(1e-12));
  CHECK(layer.output_bytes == Bytes(1024));
  CHECK(layer.param_bytes == Bytes(2048));
  CHECK(layer.inputs.empty());
}

TEST_CASE("a multi-output activation counts as the sum of its parts", "[planner][pipedream][import]") {
  const Profile p = import_ok(node("node7", "LSTM(2048, 1024)", 1, 1, "[6291456.0; 131072.0; 131072.0]", 0));
  CHECK(p.layers[0].output_bytes == Bytes(6291456 + 131072 + 131072));
}

TEST_CASE("layers come out in topological order, ties by the id's number", "[planner][pipedream][import]") {
  // Lines in reverse order; node10 must not sort before node9 as text would.
  const std::string text = node("node10", "D", 1, 1, "1.0", 0) + node("node9", "C", 1, 1, "1.0", 0) +
                           node("node3", "B", 1, 1, "1.0", 0) + node("node2", "A", 1, 1, "1.0", 0) +
                           edge("node2", "node10") + edge("node2", "node9") + edge("node9", "node3") +
                           edge("node10", "node3");
  const Profile p = import_ok(text);
  REQUIRE(p.num_layers() == 4);
  // node2 first; node9 and node10 ready together (node9 first); node3 last.
  CHECK(p.layers[0].name == "node2");
  CHECK(p.layers[1].name == "node9");
  CHECK(p.layers[2].name == "node10");
  CHECK(p.layers[3].name == "node3");
  CHECK(p.layers[1].inputs == std::vector<int>{0});
  CHECK(p.layers[2].inputs == std::vector<int>{0});
  CHECK(p.layers[3].inputs == std::vector<int>{1, 2});  // in-edges in file order
}

TEST_CASE("Input and __getitem__ nodes are kept but the planner's view leaves them out",
          "[planner][pipedream][import]") {
  const std::string text =
      node("node1", "Input0", 17.0, 0, "100.0", 0) + node("node2", "LSTM", 1, 2, "[10.0; 5.0]", 64) +
      node("node3", "__getitem__(0)", 0, 0, "10.0", 0) + node("node4", "__getitem__(1)", 0, 0, "5.0", 0) +
      node("node5", "Linear", 3, 4, "8.0", 32) + edge("node1", "node2") + edge("node2", "node3") +
      edge("node2", "node4") + edge("node3", "node5");
  const Profile p = import_ok(text);
  REQUIRE(p.num_layers() == 5);
  CHECK(p.layers[0].description == "Input0");
  CHECK(p.layers[0].forward.value == Approx(17e-3));  // the file's value, kept
  auto roles = classify_layers(p);
  REQUIRE(roles.ok());
  // node3 feeds node5, so only the unused node4 is a dropped sink.
  CHECK(*roles == std::vector<LayerRole>{LayerRole::kInput, LayerRole::kNode, LayerRole::kNode, LayerRole::kDroppedSink,
                                         LayerRole::kNode});
}

TEST_CASE("a trailing stage_id and a description with separators are accepted", "[planner][pipedream][import]") {
  const Profile p = import_ok(
      "node1 -- Seq -- (a -- b) -- forward_compute_time=1.000, backward_compute_time=2.000, "
      "activation_size=4.0, parameter_size=8.000 -- stage_id=3\n\n");
  CHECK(p.layers[0].description == "Seq -- (a -- b)");
  CHECK(p.layers[0].param_bytes == Bytes(8));
}

TEST_CASE("import errors name the file, the line and its text", "[planner][pipedream][import]") {
  const std::string good = node("node1", "A", 1, 1, "1.0", 0) + node("node2", "B", 1, 1, "1.0", 0);
  SECTION("malformed node line") {
    const std::string message = import_error(good + "node3 -- C -- forward_compute_time=1\n");
    CHECK_THAT(message, Catch::Contains("test/graph.txt:3:"));
    CHECK_THAT(message, Catch::Contains("node3 -- C -- forward_compute_time=1"));
  }
  SECTION("bad number") {
    const std::string message = import_error(node("node1", "A", 1, 1, "-5.0", 0));
    CHECK_THAT(message, Catch::Contains("test/graph.txt:1:"));
    CHECK_THAT(message, Catch::Contains("activation_size"));
  }
  SECTION("edge naming an unknown node") {
    const std::string message = import_error(good + edge("node1", "node9"));
    CHECK_THAT(message, Catch::Contains("test/graph.txt:3:"));
    CHECK_THAT(message, Catch::Contains("unknown node 'node9'"));
  }
  SECTION("malformed edge") {
    const std::string message = import_error(good + "\tnode1 node2\n");
    CHECK_THAT(message, Catch::Contains("test/graph.txt:3:"));
  }
  SECTION("repeated node id") {
    const std::string message = import_error(good + node("node1", "C", 1, 1, "1.0", 0));
    CHECK_THAT(message, Catch::Contains("test/graph.txt:3:"));
    CHECK_THAT(message, Catch::Contains("repeats"));
  }
  SECTION("repeated edge") {
    const std::string message = import_error(good + edge("node1", "node2") + edge("node1", "node2"));
    CHECK_THAT(message, Catch::Contains("test/graph.txt:4:"));
  }
  SECTION("cycle") {
    const std::string text = good + node("node3", "C", 1, 1, "1.0", 0) + edge("node1", "node2") +
                             edge("node2", "node3") + edge("node3", "node2");
    const std::string message = import_error(text);
    CHECK_THAT(message, Catch::Contains("cycle"));
    CHECK_THAT(message, Catch::Contains("test/graph.txt:5:"));  // first edge of the cycle
    CHECK_THAT(message, Catch::Contains("node2 -- node3"));
  }
  SECTION("empty file") { CHECK_THAT(import_error("\n\n"), Catch::Contains("test/graph.txt")); }
}
