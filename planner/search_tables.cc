#include "planner/search_tables.h"

#include <algorithm>

#include "sim/schedules.h"

namespace baton {

namespace {

std::vector<int> last_use(const Profile& profile) {
  std::vector<int> last(profile.layers.size(), -1);
  for (int c = 0; c < profile.num_layers(); ++c)
    for (int p : profile.layers[c].inputs) last[p] = std::max(last[p], c);
  return last;
}

}  // namespace

RangeTables range_tables(const Profile& profile, double speed) {
  const int n = profile.num_layers();
  RangeTables t;
  t.compute_prefix.assign(n + 1, 0.0);
  t.forward_prefix.assign(n + 1, 0.0);
  t.backward_prefix.assign(n + 1, 0.0);
  t.forward_call = profile.call_cost.forward.value / speed;
  t.backward_call = profile.call_cost.backward.value / speed;
  t.params_prefix.assign(n + 1, 0.0);
  for (int i = 0; i < n; ++i) {
    const Layer& layer = profile.layers[i];
    t.compute_prefix[i + 1] = t.compute_prefix[i] + (layer.forward + layer.backward).value / speed;
    t.forward_prefix[i + 1] = t.forward_prefix[i] + layer.forward.value / speed;
    t.backward_prefix[i + 1] = t.backward_prefix[i] + layer.backward.value / speed;
    t.params_prefix[i + 1] = t.params_prefix[i] + double(layer.param_bytes.value);
    if (layer.forward.value / speed < t.forward_call || layer.backward.value / speed < t.backward_call)
      t.latency_grows = false;
  }
  const std::vector<int> last = last_use(profile);
  t.out.assign(n + 1, std::vector<double>(n + 1, 0.0));
  t.stash.assign(n + 1, std::vector<double>(n + 1, 0.0));
  for (int j = 1; j <= n; ++j) {  // out[i][j] = sum_{p in [i, j), last_use[p] >= j} bytes
    double sum = 0.0;
    for (int i = j - 1; i >= 0; --i) {
      if (last[i] >= j) sum += double(profile.layers[i].output_bytes.value);
      t.out[i][j] = sum;
    }
  }
  for (int i = 0; i < n; ++i) {  // stash = input bytes (producers < i used in [i, j)) + own outputs
    std::vector<double> enters(n + 1, 0.0);
    for (int p = 0; p < i; ++p) {
      int first = n;
      for (int c = i; c < n && first == n; ++c)
        for (int q : profile.layers[c].inputs)
          if (q == p) {
            first = c;
            break;
          }
      if (first < n) enters[first] += double(profile.layers[p].output_bytes.value);
    }
    double input = 0.0, own = 0.0;
    for (int j = i + 1; j <= n; ++j) {
      input += enters[j - 1];
      own += double(profile.layers[j - 1].output_bytes.value);
      t.stash[i][j] = input + own;
    }
  }
  return t;
}

std::vector<int> replica_counts(const Topology& topology, bool straight, Schedule schedule) {
  const int devices = topology.num_devices();
  if (straight) return {1};
  std::vector<int> counts;
  if (devices <= 32) {
    for (int r = 1; r <= devices; ++r) counts.push_back(r);
    return counts;
  }
  const int unit = topology.devices_per_unit(0);
  if (runs_steady_state(schedule)) {
    for (int base : {1, unit})
      for (int factor : {1, 3})
        for (int r = base * factor; r <= devices; r *= 2) counts.push_back(r);
  } else {
    for (int r = 1; r <= devices; r *= 2) counts.push_back(r);
    for (int r = unit; r <= devices; r += unit) counts.push_back(r);
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

std::vector<int> device_counts(const Topology& topology, bool straight, int layers) {
  const int devices = topology.num_devices();
  std::vector<int> counts;
  if (straight || devices <= 16) {
    for (int d = 1; d <= std::min(devices, straight ? layers : devices); ++d) counts.push_back(d);
    return counts;
  }
  for (int d = devices; d >= 1; d /= 2) counts.push_back(d);
  return counts;
}

}  // namespace baton
