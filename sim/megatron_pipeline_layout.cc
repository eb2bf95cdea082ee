// --pipeline-model-parallel-layout (sim/megatron.h's parse_pipeline_layout
// and check_pipeline_layout): Megatron-core's layout strings, read as its
// pipeline_parallel_layer_layout.py reads them, and checked against the
// model with its rules (validate_layer_layout) and baton's own.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/megatron.h"

namespace baton {

namespace {

constexpr int64_t kMostLayoutLetters = kMaxGptLayers * 4;
constexpr std::string_view kFlag = "--pipeline-model-parallel-layout";

Error layout_error(std::string_view text, const std::string& what) {
  return Error{fmt::format("{} \"{}\": {}", kFlag, text, what)};
}

// The count after a "*" at `at` (the "*" itself); -1 when none follows.
int64_t count_after(std::string_view s, size_t at, size_t& end) {
  end = at + 1;
  int64_t n = 0;
  for (; end < s.size() && s[end] >= '0' && s[end] <= '9'; ++end)
    n = std::min(n * 10 + (s[end] - '0'), kMostLayoutLetters + 1);
  return end == at + 1 ? -1 : n;
}

}  // namespace

Result<std::vector<std::string>> parse_pipeline_layout(std::string_view text) {
  std::string s;
  for (const char c : text)
    if (c != ',' && c != ' ') s += c;  // Megatron drops the commas; baton the spaces too
  // "(...)*n": the group repeated n times, left to right, no group inside.
  std::string grouped;
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '(') {
      grouped += s[i++];
      continue;
    }
    const size_t close = s.find(')', i);
    if (close == std::string::npos || s.find('(', i + 1) < close)
      return layout_error(text, "a \"(\" without its \")\" (groups do not nest)");
    size_t end = 0;
    const int64_t n = close + 1 < s.size() && s[close + 1] == '*' ? count_after(s, close + 1, end) : -1;
    if (n < 0) return layout_error(text, "a group \"(...)\" needs a count, \"(...)*n\"");
    const std::string body = s.substr(i + 1, close - i - 1);
    if (static_cast<int64_t>(grouped.size() + body.size() * static_cast<size_t>(n)) > kMostLayoutLetters)
      return layout_error(text, fmt::format("more than {} letters", kMostLayoutLetters));
    for (int64_t k = 0; k < n; ++k) grouped += body;
    i = end;
  }
  // "x*n": the letter before it n times.
  std::string flat;
  for (size_t i = 0; i < grouped.size(); ++i) {
    if (grouped[i] != '*') {
      flat += grouped[i];
      continue;
    }
    size_t end = 0;
    const int64_t n = count_after(grouped, i, end);
    if (n < 0 || flat.empty()) return layout_error(text, "\"*\" goes after a letter or a group, with a count");
    if (static_cast<int64_t>(flat.size()) + n > kMostLayoutLetters)
      return layout_error(text, fmt::format("more than {} letters", kMostLayoutLetters));
    const char letter = flat.back();
    flat.pop_back();
    flat.append(static_cast<size_t>(n), letter);
    i = end - 1;
  }
  std::vector<std::string> chunks(1);
  for (const char c : flat) {
    if (c == '|') {
      chunks.emplace_back();
    } else if (c == 'E' || c == 't' || c == 'm' || c == 'L') {
      chunks.back() += c;
    } else {
      return layout_error(text, fmt::format("'{}' is not a layer: E (embedding), t (transformer block), m "
                                            "(multi-token prediction depth), L (loss), | between stages",
                                            c));
    }
  }
  return chunks;
}

Status check_pipeline_layout(const GptModel& model, const MegatronLayout& layout) {
  const std::vector<std::string>& chunks = layout.layout_chunks;
  if (chunks.empty()) return ok_status();
  const std::string_view text = layout.pipeline_layout;
  // The other ways of splitting the blocks, and the schedules baton runs on fixed chunks.
  const struct {
    bool given;
    const char* flag;
  } others[] = {{layout.layers_per_virtual_stage > 0, "--num-layers-per-virtual-pipeline-stage"},
                {layout.first_stage_layers > 0, "--decoder-first-pipeline-num-layers"},
                {layout.last_stage_layers > 0, "--decoder-last-pipeline-num-layers"},
                {layout.embedding_in_split, "--account-for-embedding-in-pipeline-split"},
                {layout.loss_in_split, "--account-for-loss-in-pipeline-split"}};
  for (const auto& other : others)
    if (other.given) return Error{fmt::format("{} sets every chunk's layers: drop {}", kFlag, other.flag)};
  if (layout.zero_bubble > 0 || layout.v_schedule != VSchedule::kNone)
    return Error{
        fmt::format("{}: baton runs it with 1F1B or interleaved 1F1B, not with the zero-bubble or V-shaped "
                    "schedules",
                    kFlag)};
  const int p = layout.pipeline;
  if (static_cast<int>(chunks.size()) % p != 0)
    return layout_error(
        text, fmt::format("{} stages, not a multiple of --pipeline-model-parallel-size {}", chunks.size(), p));
  if (p == 1 && chunks.size() > 1)
    return layout_error(text, fmt::format("{} stages on --pipeline-model-parallel-size 1: interleaving needs p of at "
                                          "least 2",
                                          chunks.size()));
  std::string flat;
  for (size_t k = 0; k < chunks.size(); ++k) {
    if (chunks[k].empty())
      return layout_error(text, fmt::format("stage {} is empty; baton does not model empty pipeline stages", k));
    flat += chunks[k];
  }
  // Megatron-core's validate_layer_layout.
  if (flat.front() != 'E') return layout_error(text, "the first layer must be the embedding, E");
  if (flat.back() != 'L') return layout_error(text, "the last layer must be the loss, L");
  if (std::count(flat.begin(), flat.end(), 'E') != 1 || std::count(flat.begin(), flat.end(), 'L') != 1)
    return layout_error(text, "E and L each exactly once");
  const int64_t blocks = std::count(flat.begin(), flat.end(), 't');
  if (blocks != model.layers)
    return layout_error(text, fmt::format("{} transformer blocks (t) for --num-layers {}", blocks, model.layers));
  const int64_t depths = std::count(flat.begin(), flat.end(), 'm');
  if (depths != model.mtp_layers)
    return layout_error(
        text, fmt::format("{} multi-token prediction depths (m) for --mtp-num-layers {}", depths, model.mtp_layers));
  if (depths > 0) {
    if (flat.find('t', flat.find('m')) != std::string::npos)
      return layout_error(text, "the transformer blocks (t) go before the multi-token prediction depths (m)");
    // Megatron-core also wants that stage to be the last chunk of its rank:
    // with no stage empty it is (only L may follow it, in the last chunk).
    const auto holds = std::count_if(chunks.begin(), chunks.end(),
                                     [](const std::string& c) { return c.find('m') != std::string::npos; });
    if (holds != 1)
      return layout_error(text, "the multi-token prediction depths (m) go in one stage (Megatron-core's restriction)");
  }
  return ok_status();
}

}  // namespace baton
