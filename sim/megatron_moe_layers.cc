// --moe-layer-freq's reader (sim/megatron.h's parse_moe_layer_freq): an
// integer, or Megatron's list expression of 0s and 1s.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/megatron.h"

namespace baton {

namespace {

// A recursive-descent reader of --moe-layer-freq's list expressions:
//   sum := product ('+' product)*;  product := atom ('*' count)*;
//   atom := '[' digit (',' digit)* ']' | '(' sum ')'.
class PatternReader {
 public:
  explicit PatternReader(std::string_view text) : text_(text) {}
  Result<std::vector<uint8_t>> read() {
    auto out = sum();
    if (!out) return out;
    skip();
    if (at_ < text_.size()) return fail("unexpected text");
    return out;
  }

 private:
  Error fail(std::string_view what) const {
    return Error{
        fmt::format("--moe-layer-freq \"{}\": {} at character {} (give an integer N, or a list of 0s and 1s "
                    "such as \"([1]*3+[0]*1)*3\")",
                    text_, what, at_ + 1)};
  }
  void skip() {
    while (at_ < text_.size() && text_[at_] == ' ') ++at_;
  }
  bool take(char c) {
    skip();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  Result<int64_t> number() {
    skip();
    int64_t value = 0;
    const size_t start = at_;
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9' && value <= kMaxGptLayers)
      value = value * 10 + (text_[at_++] - '0');
    if (at_ == start) return fail("a number expected");
    return value;
  }
  Result<std::vector<uint8_t>> sum() {
    auto out = product();
    if (!out) return out;
    while (take('+')) {
      auto more = product();
      if (!more) return more;
      out->insert(out->end(), more->begin(), more->end());
      if (out->size() > static_cast<size_t>(kMaxGptLayers)) return fail("more entries than any model has layers");
    }
    return out;
  }
  Result<std::vector<uint8_t>> product() {
    auto out = atom();
    if (!out) return out;
    while (take('*')) {
      auto times = number();
      if (!times) return times.error();
      if (static_cast<double>(out->size()) * static_cast<double>(*times) > static_cast<double>(kMaxGptLayers))
        return fail("more entries than any model has layers");
      std::vector<uint8_t> repeated;
      for (int64_t i = 0; i < *times; ++i) repeated.insert(repeated.end(), out->begin(), out->end());
      *out = std::move(repeated);
    }
    return out;
  }
  Result<std::vector<uint8_t>> atom() {
    if (take('(')) {
      auto out = sum();
      if (!out) return out;
      if (!take(')')) return fail("')' expected");
      return out;
    }
    if (!take('[')) return fail("'[' or '(' expected");
    std::vector<uint8_t> out;
    do {
      auto value = number();
      if (!value) return value.error();
      if (*value > 1) return fail("an entry other than 0 or 1");
      out.push_back(static_cast<uint8_t>(*value));
    } while (take(','));
    if (!take(']')) return fail("']' expected");
    return out;
  }

  std::string_view text_;
  size_t at_ = 0;
};

}  // namespace

Status parse_moe_layer_freq(std::string_view text, GptModel& model) {
  const bool integer =
      !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (integer) {
    if (text.size() > 6) return Error{fmt::format("--moe-layer-freq {} is larger than any model's layers", text)};
    model.moe_layer_freq = std::stoll(std::string(text));
    model.moe_layer_pattern.clear();
    return ok_status();
  }
  auto pattern = PatternReader(text).read();
  if (!pattern) return pattern.error();
  model.moe_layer_pattern = std::move(*pattern);
  model.moe_layer_freq = 0;
  return ok_status();
}

}  // namespace baton
