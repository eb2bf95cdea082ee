// Weights: the error measure of the tests and a JSON form for runs that save them.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "exec/executor.h"
#include "sim/json_fields.h"

namespace baton::exec {

double max_relative_error(const Weights& a, const Weights& b) {
  if (a.layers.size() != b.layers.size()) return INFINITY;
  double worst = 0.0;
  for (size_t l = 0; l < a.layers.size(); ++l) {
    if (a.layers[l].size() != b.layers[l].size()) return INFINITY;
    for (size_t p = 0; p < a.layers[l].size(); ++p) {
      const std::vector<float>& x = a.layers[l][p];
      const std::vector<float>& y = b.layers[l][p];
      if (x.size() != y.size()) return INFINITY;
      double diff = 0.0;
      double norm = 0.0;
      for (size_t i = 0; i < x.size(); ++i) {
        diff += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
        norm += static_cast<double>(y[i]) * y[i];
      }
      worst = std::max(worst, std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30));
    }
  }
  return worst;
}

// {"format": "baton.weights.v1", "layers": [[[floats of param 0], [param 1], ...], ...]}
nlohmann::json weights_to_json(const Weights& weights) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& layer : weights.layers) layers.push_back(layer);
  return nlohmann::json{{"format", "baton.weights.v1"}, {"layers", std::move(layers)}};
}

Result<Weights> weights_from_json(const nlohmann::json& document, const std::string& source) {
  const auto tag = document.is_object() ? document.find("format") : document.end();
  if (!document.is_object() || tag == document.end() || *tag != "baton.weights.v1")
    return Error{fmt::format("{}: not a baton.weights.v1 document", source)};
  if (auto ok = json_fields::check_known_keys(document, json_fields::FieldPath(source), {"format", "layers"}); !ok)
    return ok.error();
  try {
    Weights weights;
    weights.layers = document.at("layers").get<std::vector<std::vector<std::vector<float>>>>();
    return weights;
  } catch (const nlohmann::json::exception& e) {
    return Error{fmt::format("{}: layers: {}", source, e.what())};
  }
}

}  // namespace baton::exec
