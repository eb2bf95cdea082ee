// Megatron's choices that a layout makes by name (sim/megatron.h's
// MegatronLayout): recomputation, the V-shaped schedules, context
// parallelism's communication, the MoE token dispatcher and the zero-bubble
// schedules, with the names Megatron-LM's flags take and their readers
// (sim/megatron_names.cc), so plan files, reports and `plan`'s emitted flags
// spell them as Megatron-LM does.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace baton {

enum class Recompute { kNone, kSelective, kFull };
// The V-shaped schedules: two chunks per GPU, chunk c of the 2p on rank c for
// c < p and on rank 2p - 1 - c after (the first and the last chunk, with the
// embedding and the output layer, on rank 0), the backward split into its
// input (I) and weight (W) passes. ZB-V is the Zero Bubble authors' V
// schedule (their fork's --zero-bubble-v-schedule; Qi et al., ICLR 2024,
// section 6), DualPipeV DeepSeek's (DeepSeek-V3 report, its V form of
// DualPipe; baton's flag --dualpipev). sim/schedules.h has their orders.
enum class VSchedule { kNone, kZbV, kDualPipeV };
// How context parallelism moves the keys and values (Megatron-core's
// --cp-comm-type, Transformer Engine's implementations): p2p passes them
// round a ring while each step's attention computes; all_gather gathers them
// all before the attention (and again in the backward, with a
// reduce-scatter of their gradients); a2a (DeepSpeed-Ulysses' all-to-all)
// trades the sequence split for a split of the heads around the attention.
enum class ContextComm { kP2P, kAllGather, kAllToAll };
const char* context_comm_name(ContextComm comm);  // "p2p", "all_gather", "a2a"
// The names back, and "allgather" (as Megatron's help text spells it; the
// flag's value goes to Transformer Engine, which takes "all_gather").
std::optional<ContextComm> parse_context_comm(std::string_view name);
// How a MoE layer moves the tokens to their experts and back (Megatron-core's
// --moe-token-dispatcher-type; sim/megatron_block.h has the terms):
// allgather (Megatron-core's default) gathers every token of the etp x ep
// GPUs of an expert group onto each of them, which keeps its own experts'
// tokens, and reduce-scatters the experts' outputs back; alltoall sends each
// token's k copies to the ranks of their experts and back by all-to-alls
// among the ep ranks, the etp GPUs of an expert then gathering what their
// expert received; flex (DeepEP's kernels, Megatron-core's
// MoEFlexTokenDispatcher) sends each token once to each GPU of the etp x ep
// group that holds one of its experts (an expert's etp shards each), across
// servers once to each server over RDMA, forwarded inside it over NVLink.
enum class MoeDispatcher { kAllGather, kAllToAll, kFlex };
const char* moe_dispatcher_name(MoeDispatcher dispatcher);                 // "allgather", "alltoall", "flex"
std::optional<MoeDispatcher> parse_moe_dispatcher(std::string_view name);  // the names back
// Whether the dispatcher sends tokens to their experts' ranks (alltoall,
// flex), which Megatron's two all-to-all overlaps ask for.
constexpr bool sends_to_expert_ranks(MoeDispatcher dispatcher) { return dispatcher != MoeDispatcher::kAllGather; }
const char* v_schedule_name(VSchedule schedule);                   // "none", "zbv", "dualpipev"
std::optional<VSchedule> parse_v_schedule(std::string_view name);  // the names back
const char* recompute_name(Recompute recompute);                   // "none", "selective", "full"
const char* zero_bubble_name(int zero_bubble);                     // "1f1b", "zb-h1", "zb-h2"
// The names back; nothing for any other text.
std::optional<Recompute> parse_recompute(std::string_view name);
std::optional<int> parse_zero_bubble(std::string_view name);
// MegatronLayout::zero_bubble from the fork's --zero-bubble-max-pending-backward:
// 1 for p (ZB-H1), 2 for 2p (ZB-H2), nothing for any other limit.
std::optional<int> zero_bubble_of_pending(int64_t pending, int pipeline);

}  // namespace baton
