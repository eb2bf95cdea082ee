// Units: strong value types for time and size.
//
// Contract: every quantity that crosses a module boundary carries its unit in
// its type (`Seconds`, `Bytes`) or in its name (`bandwidth_gbps`). The types are
// plain values (copyable, comparable, no allocation); arithmetic that mixes
// units goes through the named helpers below so the conversion is visible.
// Thread safety: values only, no shared state.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>

namespace baton {

// Seconds of (simulated or measured) time.
struct Seconds {
  double value = 0.0;

  constexpr Seconds() = default;
  constexpr explicit Seconds(double s) : value(s) {}

  static constexpr Seconds from_ms(double ms) { return Seconds(ms * 1e-3); }
  static constexpr Seconds from_us(double us) { return Seconds(us * 1e-6); }
  constexpr double ms() const { return value * 1e3; }
  constexpr double us() const { return value * 1e6; }

  constexpr Seconds operator+(Seconds o) const { return Seconds(value + o.value); }
  constexpr Seconds operator-(Seconds o) const { return Seconds(value - o.value); }
  constexpr Seconds operator*(double k) const { return Seconds(value * k); }
  constexpr Seconds operator/(double k) const { return Seconds(value / k); }
  constexpr double operator/(Seconds o) const { return value / o.value; }
  constexpr Seconds& operator+=(Seconds o) {
    value += o.value;
    return *this;
  }
  constexpr Seconds& operator-=(Seconds o) {
    value -= o.value;
    return *this;
  }
  constexpr auto operator<=>(const Seconds&) const = default;
};

constexpr Seconds max(Seconds a, Seconds b) { return a.value < b.value ? b : a; }
constexpr Seconds min(Seconds a, Seconds b) { return a.value < b.value ? a : b; }

// A size in bytes. Signed so that differences (freeing memory) are natural;
// a negative size is a bug and is checked where sizes enter (the loaders).
struct Bytes {
  int64_t value = 0;

  constexpr Bytes() = default;
  constexpr explicit Bytes(int64_t b) : value(b) {}

  static constexpr int64_t kGiB = int64_t{1} << 30;
  static constexpr Bytes from_gib(double gib) { return Bytes(static_cast<int64_t>(gib * static_cast<double>(kGiB))); }
  // A size a model computes in floating point, held to [0, 2^60 bytes] (an
  // exbibyte, more than any device holds, with room to add a few): a model's
  // arithmetic outgrows int64 before its inputs look absurd (attention's
  // scores grow as heads x sequence^2 x micro-batch), and casting such a
  // double to int64 is undefined. NaN and infinity give the bound.
  static constexpr int64_t kMaxCounted = int64_t{1} << 60;
  static constexpr Bytes counted(double bytes) {
    if (!(bytes < static_cast<double>(kMaxCounted))) return Bytes(kMaxCounted);
    return Bytes(bytes > 0.0 ? static_cast<int64_t>(bytes) : 0);
  }
  // The same, rounded to the nearest byte (a size times a factor, say).
  static Bytes rounded(double bytes) { return counted(std::round(bytes)); }
  constexpr double gib() const { return static_cast<double>(value) / static_cast<double>(kGiB); }
  constexpr double mib() const { return static_cast<double>(value) / (1024.0 * 1024.0); }

  // Sums, differences and multiples saturate at int64's ends instead of
  // wrapping (which is undefined, and turned a profile of absurd sizes into a
  // negative or zero peak that "fits"): a saturated size stays larger than any
  // memory, so what cannot fit is reported as not fitting.
  constexpr Bytes operator+(Bytes o) const { return Bytes(saturated_add(value, o.value)); }
  constexpr Bytes operator-(Bytes o) const { return Bytes(saturated_sub(value, o.value)); }
  constexpr Bytes operator*(int64_t k) const {
    int64_t product = 0;
    if (__builtin_mul_overflow(value, k, &product)) return Bytes((value < 0) != (k < 0) ? INT64_MIN : INT64_MAX);
    return Bytes(product);
  }
  constexpr Bytes& operator+=(Bytes o) {
    value = saturated_add(value, o.value);
    return *this;
  }
  constexpr Bytes& operator-=(Bytes o) {
    value = saturated_sub(value, o.value);
    return *this;
  }
  constexpr auto operator<=>(const Bytes&) const = default;

 private:
  static constexpr int64_t saturated_add(int64_t a, int64_t b) {
    int64_t sum = 0;
    if (__builtin_add_overflow(a, b, &sum)) return b < 0 ? INT64_MIN : INT64_MAX;
    return sum;
  }
  static constexpr int64_t saturated_sub(int64_t a, int64_t b) {
    int64_t difference = 0;
    if (__builtin_sub_overflow(a, b, &difference)) return b < 0 ? INT64_MAX : INT64_MIN;
    return difference;
  }
};

constexpr Bytes max(Bytes a, Bytes b) { return a.value < b.value ? b : a; }

// Link bandwidth. Topology files give gigabits per second (networking
// convention: 1 Gb/s = 1e9 bit/s); the simulator works in bytes per second.
struct Bandwidth {
  double bytes_per_s = 0.0;

  static constexpr Bandwidth from_gbps(double gbps) { return Bandwidth{gbps * 1e9 / 8.0}; }
  constexpr double gbps() const { return bytes_per_s * 8.0 / 1e9; }
};

// Time to push `size` through a link of bandwidth `bw` (no latency).
inline Seconds transfer_time(Bytes size, Bandwidth bw) {
  return Seconds(static_cast<double>(size.value) / bw.bytes_per_s);
}

}  // namespace baton
