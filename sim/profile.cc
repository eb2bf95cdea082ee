#include "sim/profile.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/json_fields.h"

namespace baton {

using json_fields::FieldPath;
using nlohmann::json;

CallCost per_call_cost(const Profile& profile, const WholePass& pass) {
  const int calls = profile.num_layers() - 1;
  if (calls < 1) return CallCost{};
  Seconds forward, backward, optimizer;
  for (const Layer& layer : profile.layers) {
    forward += layer.forward;
    backward += layer.backward;
    optimizer += layer.optimizer;
  }
  return CallCost{(forward - pass.forward) / calls, (backward - pass.backward) / calls,
                  (optimizer - pass.optimizer) / calls};
}

CallCost call_cost_from(const Profile& profile, const WholePass& pass) {
  const CallCost per_call = per_call_cost(profile, pass);
  return CallCost{max(per_call.forward, Seconds(0.0)), max(per_call.backward, Seconds(0.0)),
                  max(per_call.optimizer, Seconds(0.0))};
}

Seconds forward_time(const Profile& profile, LayerRange range) {
  Seconds total;
  for (int i = range.begin; i < range.end; ++i) total += profile.layers[i].forward;
  return total;
}

Seconds backward_time(const Profile& profile, LayerRange range) {
  Seconds total;
  for (int i = range.begin; i < range.end; ++i) total += profile.layers[i].backward;
  return total;
}

Bytes param_bytes(const Profile& profile, LayerRange range) {
  Bytes total;
  for (int i = range.begin; i < range.end; ++i) total += profile.layers[i].param_bytes;
  return total;
}

Bytes input_bytes(const Profile& profile, LayerRange range) {
  // Each producer outside the range counts once, however many consumers inside.
  Bytes total;
  std::vector<bool> counted(static_cast<size_t>(range.begin), false);
  for (int i = range.begin; i < range.end; ++i) {
    for (int producer : profile.layers[i].inputs) {
      if (producer < range.begin && !counted[producer]) {
        counted[producer] = true;
        total += profile.layers[producer].output_bytes;
      }
    }
  }
  return total;
}

Bytes output_bytes(const Profile& profile, LayerRange range) {
  Bytes total;
  std::vector<bool> counted(static_cast<size_t>(range.size()), false);
  for (int i = range.end; i < profile.num_layers(); ++i) {
    for (int producer : profile.layers[i].inputs) {
      if (producer >= range.begin && producer < range.end && !counted[producer - range.begin]) {
        counted[producer - range.begin] = true;
        total += profile.layers[producer].output_bytes;
      }
    }
  }
  return total;
}

Bytes stashed_activation_bytes(const Profile& profile, LayerRange range) {
  Bytes total = input_bytes(profile, range);
  for (int i = range.begin; i < range.end; ++i) total += profile.layers[i].output_bytes;
  return total;
}

namespace {

// Every layer's name and position, read ahead so that an input naming a later
// layer (a cycle, or layers out of order) is told apart from an unknown name.
std::unordered_map<std::string, int> all_layer_names(const json& layers) {
  std::unordered_map<std::string, int> names;
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i].is_object() && layers[i].contains("name") && layers[i]["name"].is_string())
      names.emplace(layers[i]["name"].get<std::string>(), static_cast<int>(i));
  return names;
}

Error bad_input_name(const FieldPath& at, const json& name, int own_index,
                     const std::unordered_map<std::string, int>& all_names) {
  auto later = all_names.find(name.get<std::string>());
  if (later == all_names.end()) return at.error("names no layer of the profile", name);
  if (later->second == own_index) return at.error("names the layer itself (a cycle)", name);
  return at.error(fmt::format("names layer {}, which is not listed before this one: the inputs form a cycle "
                              "or the layers are not in topological order",
                              later->second),
                  name);
}

Result<std::vector<int>> read_inputs(const json& layer, const FieldPath& at, int own_index,
                                     const std::unordered_map<std::string, int>& index_of,
                                     const std::unordered_map<std::string, int>& all_names) {
  auto it = layer.find("inputs");
  if (it == layer.end()) {
    if (own_index == 0) return std::vector<int>{};
    return std::vector<int>{own_index - 1};
  }
  const FieldPath here = at.field("inputs");
  if (!it->is_array()) return here.error("must be an array of layer names", *it);
  std::vector<int> inputs;
  for (size_t k = 0; k < it->size(); ++k) {
    const json& name = (*it)[k];
    if (!name.is_string()) return here.index(k).error("must be a layer name", name);
    auto found = index_of.find(name.get<std::string>());
    if (found == index_of.end()) return bad_input_name(here.index(k), name, own_index, all_names);
    inputs.push_back(found->second);
  }
  return inputs;
}

// The experts' work of `layer` (its passes and overlaps read): all three keys
// or none, within the passes.
Status read_expert_work(const json& value, const FieldPath& at, Layer& layer) {
  static constexpr const char* kKeys[] = {"expert_forward_ms", "expert_backward_input_ms", "expert_backward_weight_ms"};
  int given = 0;
  for (const char* key : kKeys) given += value.contains(key) ? 1 : 0;
  if (given == 0) return ok_status();
  if (given != 3)
    return at.error("must give expert_forward_ms, expert_backward_input_ms and expert_backward_weight_ms, or none");
  double ms[3] = {};
  for (int i = 0; i < 3; ++i) {
    auto read = json_fields::read_number(value, at, kKeys[i], 0.0, false);
    if (!read) return read.error();
    ms[i] = *read;
  }
  const auto within = [&](const char* key, double used, Seconds pass, const char* what) -> Status {
    if (used > pass.ms() * (1 + 1e-9) + 1e-9)
      return at.field(key).error(
          fmt::format("with the pass's overlap makes {} ms, more than {} {} ms", used, what, pass.ms()), value[key]);
    return ok_status();
  };
  if (auto ok = within("expert_forward_ms", ms[0] + layer.forward_overlap.ms(), layer.forward, "forward_ms"); !ok)
    return ok;
  if (auto ok = within("expert_backward_input_ms", ms[1] + ms[2] + layer.backward_overlap.ms(), layer.backward,
                       "backward_ms");
      !ok)
    return ok;
  if (layer.backward_weight && ms[2] > layer.backward_weight->ms() * (1 + 1e-9) + 1e-9)
    return at.field("expert_backward_weight_ms")
        .error(fmt::format("must be at most backward_weight_ms {} ms", layer.backward_weight->ms()),
               value["expert_backward_weight_ms"]);
  layer.experts = Layer::ExpertWork{Seconds::from_ms(ms[0]), Seconds::from_ms(ms[1]), Seconds::from_ms(ms[2])};
  return ok_status();
}

Result<Layer> read_layer(const json& value, const FieldPath& at, int index,
                         const std::unordered_map<std::string, int>& index_of,
                         const std::unordered_map<std::string, int>& all_names) {
  if (auto ok = json_fields::check_object(value, at); !ok) return ok.error();
  if (auto ok = json_fields::check_known_keys(
          value, at,
          {"name", "description", "forward_ms", "backward_ms", "backward_input_ms", "backward_weight_ms",
           "optimizer_ms", "output_bytes", "param_bytes", "inputs", "host_forward_ms", "host_backward_ms",
           "forward_overlap_ms", "backward_overlap_ms", "expert_forward_ms", "expert_backward_input_ms",
           "expert_backward_weight_ms"});
      !ok)
    return ok.error();
  Layer layer;
  auto name = json_fields::read_string(value, at, "name");
  if (!name) return name.error();
  if (name->empty()) return at.field("name").error("must not be empty", value["name"]);
  if (index_of.count(*name) != 0) return at.field("name").error("repeats an earlier layer's name", value["name"]);
  layer.name = *name;
  auto description = json_fields::read_string_or(value, at, "description", "");
  if (!description) return description.error();
  layer.description = *description;
  auto fwd = json_fields::read_number(value, at, "forward_ms", 0.0, false);
  if (!fwd) return fwd.error();
  auto bwd = json_fields::read_number(value, at, "backward_ms", 0.0, false);
  if (!bwd) return bwd.error();
  layer.forward = Seconds::from_ms(*fwd);
  layer.backward = Seconds::from_ms(*bwd);
  const bool has_bi = value.contains("backward_input_ms");
  const bool has_bw = value.contains("backward_weight_ms");
  if (has_bi != has_bw) return at.error("must give both backward_input_ms and backward_weight_ms, or neither");
  if (has_bi) {
    auto bi = json_fields::read_number(value, at, "backward_input_ms", 0.0, false);
    if (!bi) return bi.error();
    auto bw = json_fields::read_number(value, at, "backward_weight_ms", 0.0, false);
    if (!bw) return bw.error();
    // The halves must add up to the whole, to rounding (1e-6 relative, and
    // 1 ns for tiny layers): a split that does not is a wrong measurement.
    if (std::abs(*bi + *bw - *bwd) > 1e-6 * std::max(*bwd, 1e-3))
      return at.error(fmt::format("backward_input_ms + backward_weight_ms = {} + {} = {} is not backward_ms = {}", *bi,
                                  *bw, *bi + *bw, *bwd));
    layer.backward_input = Seconds::from_ms(*bi);
    layer.backward_weight = Seconds::from_ms(*bw);
  }
  if (value.contains("optimizer_ms")) {
    auto optimizer = json_fields::read_number(value, at, "optimizer_ms", 0.0, false);
    if (!optimizer) return optimizer.error();
    layer.optimizer = Seconds::from_ms(*optimizer);
  }
  for (auto [key, into] :
       {std::pair{"host_forward_ms", &layer.host_forward}, std::pair{"host_backward_ms", &layer.host_backward}}) {
    if (!value.contains(key)) continue;
    auto host = json_fields::read_number(value, at, key, 0.0, false);
    if (!host) return host.error();
    *into = Seconds::from_ms(*host);
  }
  for (auto [key, into, pass] : {std::tuple{"forward_overlap_ms", &layer.forward_overlap, layer.forward},
                                 std::tuple{"backward_overlap_ms", &layer.backward_overlap, layer.backward}}) {
    if (!value.contains(key)) continue;
    auto overlap = json_fields::read_number(value, at, key, 0.0, false);
    if (!overlap) return overlap.error();
    if (*overlap > pass.ms() * (1 + 1e-9))
      return at.field(key).error(fmt::format("must be at most the pass's {} ms", pass.ms()), *overlap);
    *into = Seconds::from_ms(*overlap);
  }
  if (auto experts = read_expert_work(value, at, layer); !experts) return experts.error();
  auto out = json_fields::read_integer(value, at, "output_bytes", 0);
  if (!out) return out.error();
  auto params = json_fields::read_integer(value, at, "param_bytes", 0);
  if (!params) return params.error();
  layer.output_bytes = Bytes(*out);
  layer.param_bytes = Bytes(*params);
  auto inputs = read_inputs(value, at, index, index_of, all_names);
  if (!inputs) return inputs.error();
  layer.inputs = std::move(*inputs);
  return layer;
}

// The fields a profile carries for people and for other commands, which
// the simulator does not read: checked, not kept.
Status check_annotations(const json& document, const FieldPath& root) {
  if (auto derivation = json_fields::read_string_or(document, root, "derivation", ""); !derivation)
    return derivation.error();
  auto noise = document.find("compute_noise");
  if (noise == document.end()) return ok_status();
  if (auto factors = json_fields::read_number_list(*noise, root.field("compute_noise"), /*positive=*/true); !factors)
    return factors.error();
  return ok_status();
}

}  // namespace

Result<Profile> profile_from_json(const json& document, const std::string& source) {
  const FieldPath root(source);
  if (auto ok = json_fields::check_object(document, root); !ok) return ok.error();
  if (auto ok = json_fields::check_format(document, root, "baton.profile.v1"); !ok) return ok.error();
  if (auto ok = json_fields::check_known_keys(document, root,
                                              {"format", "model", "device", "microbatch_size", "layers", "derivation",
                                               "compute_noise", "call_cost_ms", "shared_streams"});
      !ok)
    return ok.error();
  if (auto ok = check_annotations(document, root); !ok) return ok.error();
  Profile profile;
  auto model = json_fields::read_string(document, root, "model");
  if (!model) return model.error();
  profile.model = *model;
  auto device = json_fields::read_string_or(document, root, "device", "unknown");
  if (!device) return device.error();
  profile.device = *device;
  auto mbs = json_fields::read_integer(document, root, "microbatch_size", 1);
  if (!mbs) return mbs.error();
  if (*mbs > kMaxMicrobatchSize)
    return root.field("microbatch_size").error(fmt::format("is too large (at most {})", kMaxMicrobatchSize), *mbs);
  profile.microbatch_size = static_cast<int>(*mbs);
  auto layers = json_fields::read_array(document, root, "layers", /*non_empty=*/true);
  if (!layers) return layers.error();
  std::unordered_map<std::string, int> index_of;
  const auto all_names = all_layer_names(**layers);
  const FieldPath layers_at = root.field("layers");
  for (size_t i = 0; i < (*layers)->size(); ++i) {
    auto layer = read_layer((**layers)[i], layers_at.index(i), static_cast<int>(i), index_of, all_names);
    if (!layer) return layer.error();
    index_of.emplace(layer->name, static_cast<int>(i));
    profile.layers.push_back(std::move(*layer));
  }
  if (auto it = document.find("call_cost_ms"); it != document.end()) {
    const FieldPath at = root.field("call_cost_ms");
    if (auto ok = json_fields::check_object(*it, at); !ok) return ok.error();
    if (auto ok = json_fields::check_known_keys(*it, at, {"forward", "backward", "optimizer"}); !ok) return ok.error();
    for (auto [key, into] :
         {std::pair{"forward", &profile.call_cost.forward}, std::pair{"backward", &profile.call_cost.backward},
          std::pair{"optimizer", &profile.call_cost.optimizer}}) {
      auto ms = json_fields::read_number(*it, at, key, 0.0, false);
      if (!ms) return ms.error();
      *into = Seconds::from_ms(*ms);
    }
  }
  if (auto it = document.find("shared_streams"); it != document.end()) {
    const FieldPath at = root.field("shared_streams");
    if (auto ok = json_fields::check_object(*it, at); !ok) return ok.error();
    if (auto ok = json_fields::check_known_keys(*it, at, {"streams", "speedup"}); !ok) return ok.error();
    auto streams = json_fields::read_integer(*it, at, "streams", 2);
    if (!streams) return streams.error();
    if (*streams > 4096) return at.field("streams").error("must be <= 4096", (*it)["streams"]);
    auto speedup = json_fields::read_number(*it, at, "speedup", 0.0, /*strict=*/true);
    if (!speedup) return speedup.error();
    profile.shared_streams = SharedStreams{static_cast<int>(*streams), *speedup};
  }
  return profile;
}

Result<Profile> parse_profile(std::string_view text, const std::string& source) {
  auto document = json_fields::parse_json_text(text, source);
  if (!document) return document.error();
  return profile_from_json(*document, source);
}

nlohmann::json profile_to_json(const Profile& profile) {
  json layers = json::array();
  for (size_t i = 0; i < profile.layers.size(); ++i) {
    const Layer& layer = profile.layers[i];
    json entry = {{"name", layer.name},
                  {"forward_ms", layer.forward.ms()},
                  {"backward_ms", layer.backward.ms()},
                  {"output_bytes", layer.output_bytes.value},
                  {"param_bytes", layer.param_bytes.value}};
    if (!layer.description.empty()) entry["description"] = layer.description;
    if (layer.optimizer.value > 0.0) entry["optimizer_ms"] = layer.optimizer.ms();
    if (layer.backward_input) {
      entry["backward_input_ms"] = layer.backward_input->ms();
      entry["backward_weight_ms"] = layer.backward_weight->ms();
    }
    if (layer.host_forward) entry["host_forward_ms"] = layer.host_forward->ms();
    if (layer.host_backward) entry["host_backward_ms"] = layer.host_backward->ms();
    if (layer.forward_overlap.value > 0.0) entry["forward_overlap_ms"] = layer.forward_overlap.ms();
    if (layer.backward_overlap.value > 0.0) entry["backward_overlap_ms"] = layer.backward_overlap.ms();
    if (layer.experts) {
      entry["expert_forward_ms"] = layer.experts->forward.ms();
      entry["expert_backward_input_ms"] = layer.experts->backward_input.ms();
      entry["expert_backward_weight_ms"] = layer.experts->backward_weight.ms();
    }
    const bool default_inputs =
        (i == 0 && layer.inputs.empty()) || (i > 0 && layer.inputs == std::vector<int>{static_cast<int>(i) - 1});
    if (!default_inputs) {
      json names = json::array();
      for (int producer : layer.inputs) names.push_back(profile.layers[producer].name);
      entry["inputs"] = names;
    }
    layers.push_back(std::move(entry));
  }
  json document{{"format", "baton.profile.v1"},
                {"model", profile.model},
                {"device", profile.device},
                {"microbatch_size", profile.microbatch_size},
                {"layers", layers}};
  if (profile.call_cost != CallCost{}) {
    document["call_cost_ms"] = {{"forward", profile.call_cost.forward.ms()},
                                {"backward", profile.call_cost.backward.ms()},
                                {"optimizer", profile.call_cost.optimizer.ms()}};
  }
  if (profile.shared_streams)
    document["shared_streams"] = {{"streams", profile.shared_streams->streams},
                                  {"speedup", profile.shared_streams->speedup}};
  return document;
}

Profile make_uniform_profile(int num_layers, Seconds forward, Seconds backward, Bytes output, Bytes params,
                             int microbatch_size) {
  Profile profile;
  profile.model = fmt::format("uniform-{}", num_layers);
  profile.device = "synthetic";
  profile.microbatch_size = microbatch_size;
  for (int i = 0; i < num_layers; ++i) {
    Layer layer;
    layer.name = fmt::format("layer{}", i);
    layer.forward = forward;
    layer.backward = backward;
    layer.output_bytes = output;
    layer.param_bytes = params;
    if (i > 0) layer.inputs = {i - 1};
    profile.layers.push_back(std::move(layer));
  }
  return profile;
}

}  // namespace baton
