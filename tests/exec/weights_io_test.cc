// The weights file (baton.weights.v1): what weights_to_json writes reads back,
// and a document with another format or a key it does not have is refused.
#include "tests/catch_compat.h"

#include <nlohmann/json.hpp>

#include "exec/executor.h"

namespace baton::testing {

TEST_CASE("weights read back, and an unknown key or format is refused", "[exec][weights]") {
  exec::Weights weights;
  weights.layers = {{{1.0f, 2.0f}, {3.0f}}, {}};
  const nlohmann::json written = exec::weights_to_json(weights);
  auto read = exec::weights_from_json(written, "w.json");
  REQUIRE(read.ok());
  CHECK(read->layers == weights.layers);

  nlohmann::json extra = written;
  extra["layer"] = nlohmann::json::array();
  auto unknown = exec::weights_from_json(extra, "w.json");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message == R"(w.json: document has an unknown key "layer" (did you mean "layers"?))");

  nlohmann::json format = written;
  format["format"] = 1;
  auto wrong = exec::weights_from_json(format, "w.json");
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message == "w.json: not a baton.weights.v1 document");
}

}  // namespace baton::testing
