// Bitset: a fixed-size set of small non-negative integers, stored as 64-bit words.
//
// Contract: the size is fixed at construction; every index passed in must be in
// [0, size()). Two bitsets combined by an operator must have the same size.
// Membership, insertion and removal are O(1); set operations and scans are
// O(size / 64). Used by the planner for node sets (closures, antichains) and
// for ancestor tests between states, where a hash set or a list would make the
// inner loops of the dynamic program slow.
// Thread safety: a plain value.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace baton {

class Bitset {
 public:
  Bitset() = default;
  explicit Bitset(int size) : size_(size), words_(static_cast<size_t>((size + 63) / 64), 0) {}

  int size() const { return size_; }

  bool test(int i) const { return (words_[word(i)] >> bit(i)) & 1u; }
  void set(int i) { words_[word(i)] |= uint64_t{1} << bit(i); }
  void reset(int i) { words_[word(i)] &= ~(uint64_t{1} << bit(i)); }

  Bitset& operator|=(const Bitset& other) {
    for (size_t w = 0; w < words_.size(); ++w) words_[w] |= other.words_[w];
    return *this;
  }
  Bitset& operator&=(const Bitset& other) {
    for (size_t w = 0; w < words_.size(); ++w) words_[w] &= other.words_[w];
    return *this;
  }
  // Removes every member of `other`.
  Bitset& subtract(const Bitset& other) {
    for (size_t w = 0; w < words_.size(); ++w) words_[w] &= ~other.words_[w];
    return *this;
  }
  bool intersects(const Bitset& other) const {
    for (size_t w = 0; w < words_.size(); ++w)
      if (words_[w] & other.words_[w]) return true;
    return false;
  }
  bool any() const {
    for (uint64_t w : words_)
      if (w != 0) return true;
    return false;
  }
  int count() const {
    int total = 0;
    for (uint64_t w : words_) total += std::popcount(w);
    return total;
  }
  bool operator==(const Bitset&) const = default;

  // Calls `visit(i)` for every member, in increasing order.
  template <typename Visit>
  void for_each(Visit&& visit) const {
    for (size_t w = 0; w < words_.size(); ++w) {
      for (uint64_t bits = words_[w]; bits != 0; bits &= bits - 1)
        visit(static_cast<int>(w * 64) + std::countr_zero(bits));
    }
  }
  std::vector<int> members() const {
    std::vector<int> out;
    for_each([&](int i) { out.push_back(i); });
    return out;
  }

  const std::vector<uint64_t>& words() const { return words_; }

 private:
  static size_t word(int i) { return static_cast<size_t>(i) >> 6; }
  static int bit(int i) { return i & 63; }

  int size_ = 0;
  std::vector<uint64_t> words_;
};

// Hash of the members, for maps keyed by a set.
struct BitsetHash {
  size_t operator()(const Bitset& set) const {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t w : set.words()) h = (h ^ w) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

}  // namespace baton
