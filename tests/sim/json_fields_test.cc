// sim/json_fields: the unknown-key check every loader runs on every object
// it reads, and the edit distance behind its "did you mean".
#include <string>

#include "tests/catch_compat.h"

#include "sim/json_fields.h"

using namespace baton;
using namespace baton::json_fields;

TEST_CASE("edit distance counts insertions, deletions, substitutions and neighbour swaps", "[json_fields]") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("size", "size") == 0);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("forwrd_ms", "forward_ms") == 1);          // one insertion
  CHECK(edit_distance("forward_mss", "forward_ms") == 1);        // one deletion
  CHECK(edit_distance("relative_sped", "relative_speed") == 1);  // one insertion
  CHECK(edit_distance("latency_ns", "latency_us") == 1);         // one substitution
  CHECK(edit_distance("szie", "size") == 1);                     // one swap of neighbours
  CHECK(edit_distance("kitten", "sitting") == 3);                // k->s, e->i, +g
  // Optimal string alignment edits no substring twice: "ca" -> "abc" is 3
  // (unrestricted Damerau-Levenshtein would give 2: swap to "ac", insert b).
  CHECK(edit_distance("ca", "abc") == 3);
  CHECK(edit_distance("ab", "ba") == 1);
}

TEST_CASE("closest_key suggests a known key within two edits and half its length", "[json_fields]") {
  const auto level_keys = {std::string_view("name"), std::string_view("size"), std::string_view("bandwidth_gbps"),
                           std::string_view("latency_us")};
  CHECK(closest_key("bandwith_gbps", level_keys) == std::optional<std::string_view>("bandwidth_gbps"));
  CHECK(closest_key("latency", level_keys) == std::nullopt);                        // 3 edits from latency_us
  CHECK(closest_key("bandwidth", level_keys) == std::nullopt);                      // 5 edits
  CHECK(closest_key("sz", level_keys) == std::optional<std::string_view>("size"));  // 2 edits, half of 4
  CHECK(closest_key("speed", level_keys) == std::nullopt);
  // A short known key takes at most half its length in edits: "x" is 2 from "ts".
  CHECK(closest_key("x", {"ts"}) == std::nullopt);
  CHECK(closest_key("tss", {"ts"}) == std::optional<std::string_view>("ts"));
  // The nearest wins; between equally near keys, the one listed first.
  CHECK(closest_key("sizes", {"sizes_x", "size"}) == std::optional<std::string_view>("size"));
  CHECK(closest_key("sise", {"size", "sine"}) == std::optional<std::string_view>("size"));
  CHECK(closest_key("sise", {"sine", "size"}) == std::optional<std::string_view>("sine"));
}

TEST_CASE("check_known_keys accepts known keys and names an unknown one with a suggestion", "[json_fields]") {
  const FieldPath level = FieldPath("topologies/a.json").field("levels").index(1);
  const Json good = Json::parse(R"({"name": "ethernet", "size": 4, "bandwidth_gbps": 10, "latency_us": 5})");
  CHECK(check_known_keys(good, level, {"name", "size", "bandwidth_gbps", "latency_us"}).ok());
  CHECK(check_known_keys(Json::object(), level, {"name"}).ok());

  const Json typo = Json::parse(R"({"name": "ethernet", "size": 4, "bandwith_gbps": 10, "latency_us": 5})");
  const Status refused = check_known_keys(typo, level, {"name", "size", "bandwidth_gbps", "latency_us"});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message ==
        R"(topologies/a.json: levels[1] has an unknown key "bandwith_gbps" (did you mean "bandwidth_gbps"?))");
}

TEST_CASE("check_known_keys lists the known keys when none is close", "[json_fields]") {
  const Json object = Json::parse(R"({"name": "g", "speed": 2})");
  const Status refused = check_known_keys(object, FieldPath("t.json").field("device"), {"name", "memory_gib"});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message == R"(t.json: device has an unknown key "speed" (expected one of: name, memory_gib))");
}

TEST_CASE("check_known_keys at the top level, with odd keys and several unknown ones", "[json_fields]") {
  const FieldPath root("p.json");
  const Status top = check_known_keys(Json::parse(R"({"modle": "m"})"), root, {"format", "model"});
  REQUIRE_FALSE(top.ok());
  CHECK(top.error().message == R"(p.json: document has an unknown key "modle" (did you mean "model"?))");
  // The key is shown as JSON, quotes and control characters escaped.
  const Status odd = check_known_keys(Json::parse(R"({"a\"b\n": 1})"), root, {"format"});
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.error().message == R"(p.json: document has an unknown key "a\"b\n" (expected one of: format))");
  // Of several unknown keys the first in nlohmann's (alphabetical) order is named.
  const Status several = check_known_keys(Json::parse(R"({"zeta": 1, "format": "f", "alpha": 2})"), root, {"format"});
  REQUIRE_FALSE(several.ok());
  CHECK(several.error().message == R"(p.json: document has an unknown key "alpha" (expected one of: format))");
}

TEST_CASE("read_number_list reads a non-empty array of finite numbers", "[json_fields]") {
  const FieldPath at = FieldPath("t.json").field("device").field("compute_noise");
  auto read = read_number_list(Json::parse("[0.5, 1, 2.25]"), at, /*positive=*/true);
  REQUIRE(read.ok());
  CHECK(*read == std::vector<double>{0.5, 1.0, 2.25});
  auto signed_values = read_number_list(Json::parse("[-3, 0, 4]"), at, /*positive=*/false);
  REQUIRE(signed_values.ok());
  CHECK(*signed_values == std::vector<double>{-3.0, 0.0, 4.0});
  auto zero = read_number_list(Json::parse("[1, 0]"), at, /*positive=*/true);
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().message == "t.json: device.compute_noise[1] must be a number > 0, got 0");
  auto empty = read_number_list(Json::array(), at, /*positive=*/false);
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().message ==
        "t.json: device.compute_noise must be a non-empty array, each a finite number, got []");
}

TEST_CASE("read_integer says a whole number above int64's range is too large, not negative", "[json_fields]") {
  const FieldPath at = FieldPath("p.json").field("layers").index(0);
  // 2^63 = 9223372036854775808: JSON's unsigned reading of it would wrap to -2^63 as int64_t.
  auto too_large = read_integer(Json::parse(R"({"output_bytes": 9223372036854775808})"), at, "output_bytes", 0);
  REQUIRE_FALSE(too_large.ok());
  CHECK(too_large.error().message ==
        "p.json: layers[0].output_bytes is too large (at most 9223372036854775807), got 9223372036854775808");
  // 2^63 - 1, the largest int64_t, is read as it is.
  auto largest = read_integer(Json::parse(R"({"output_bytes": 9223372036854775807})"), at, "output_bytes", 0);
  REQUIRE(largest.ok());
  CHECK(*largest == INT64_MAX);
}
