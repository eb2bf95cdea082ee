// Megatron's names for the choices of sim/megatron.h (recomputation, the
// zero-bubble and V schedules, context-parallel communication, the MoE token
// dispatcher, FP8 format and recipe), and their readers: the names its flags take, so plan files,
// reports and `plan`'s emitted flags spell them as Megatron-LM does.
#include "sim/megatron_names.h"

#include <initializer_list>
#include <optional>
#include <string_view>

#include "sim/megatron.h"

namespace baton {

namespace {

// The value among `values` whose name is `name`.
template <typename T>
std::optional<T> by_name(std::string_view name, std::initializer_list<T> values, const char* (*name_of)(T)) {
  for (T value : values)
    if (name == name_of(value)) return value;
  return std::nullopt;
}

}  // namespace

const char* recompute_name(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "none";
}

std::optional<Recompute> parse_recompute(std::string_view name) {
  return by_name(name, {Recompute::kNone, Recompute::kSelective, Recompute::kFull}, recompute_name);
}

std::optional<int> parse_zero_bubble(std::string_view name) { return by_name(name, {0, 1, 2}, zero_bubble_name); }

std::optional<int> zero_bubble_of_pending(int64_t pending, int pipeline) {
  if (pending == pipeline) return 1;
  if (pending == 2 * static_cast<int64_t>(pipeline)) return 2;
  return std::nullopt;
}

const char* zero_bubble_name(int zero_bubble) {
  return zero_bubble == 1 ? "zb-h1" : zero_bubble == 2 ? "zb-h2" : "1f1b";
}

const char* v_schedule_name(VSchedule schedule) {
  switch (schedule) {
    case VSchedule::kNone: return "none";
    case VSchedule::kZbV: return "zbv";
    case VSchedule::kDualPipeV: return "dualpipev";
  }
  return "none";
}

std::optional<VSchedule> parse_v_schedule(std::string_view name) {
  return by_name(name, {VSchedule::kNone, VSchedule::kZbV, VSchedule::kDualPipeV}, v_schedule_name);
}

const char* context_comm_name(ContextComm comm) {
  switch (comm) {
    case ContextComm::kP2P: return "p2p";
    case ContextComm::kAllGather: return "all_gather";
    case ContextComm::kAllToAll: return "a2a";
  }
  return "p2p";
}

std::optional<ContextComm> parse_context_comm(std::string_view name) {
  if (name == "allgather") return ContextComm::kAllGather;  // Megatron's help text spells it so
  return by_name(name, {ContextComm::kP2P, ContextComm::kAllGather, ContextComm::kAllToAll}, context_comm_name);
}

const char* moe_dispatcher_name(MoeDispatcher dispatcher) {
  switch (dispatcher) {
    case MoeDispatcher::kAllGather: return "allgather";
    case MoeDispatcher::kAllToAll: return "alltoall";
    case MoeDispatcher::kFlex: return "flex";
  }
  return "allgather";
}

std::optional<MoeDispatcher> parse_moe_dispatcher(std::string_view name) {
  return by_name(name, {MoeDispatcher::kAllGather, MoeDispatcher::kAllToAll, MoeDispatcher::kFlex},
                 moe_dispatcher_name);
}

const char* fp8_format_name(Fp8Format format) {
  switch (format) {
    case Fp8Format::kNone: return "none";
    case Fp8Format::kE4M3: return "e4m3";
    case Fp8Format::kHybrid: return "hybrid";
  }
  return "none";
}

const char* fp8_recipe_name(Fp8Recipe recipe) {
  switch (recipe) {
    case Fp8Recipe::kDelayed: return "delayed";
    case Fp8Recipe::kTensorwise: return "tensorwise";
    case Fp8Recipe::kBlockwise: return "blockwise";
    case Fp8Recipe::kMxfp8: return "mxfp8";
    case Fp8Recipe::kCustom: return "custom";
  }
  return "delayed";
}

std::optional<Fp8Format> parse_fp8_format(std::string_view name) {
  return by_name(name, {Fp8Format::kNone, Fp8Format::kE4M3, Fp8Format::kHybrid}, fp8_format_name);
}

std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view name) {
  return by_name(
      name, {Fp8Recipe::kDelayed, Fp8Recipe::kTensorwise, Fp8Recipe::kBlockwise, Fp8Recipe::kMxfp8, Fp8Recipe::kCustom},
      fp8_recipe_name);
}

}  // namespace baton
