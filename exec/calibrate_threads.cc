// Link calibration of the threads backend on one device (exec/executor.h:
// measure_link_threads): the hand-overs and all-reduces its workers make,
// through the same Mailbox and ThreadsReduceGroup, timed by the device
// (CUDA events on a GPU, exec/device.h).
// - one-way time of a size: worker 1's RECV of a message worker 0 has sent,
//   data ready (the sender's work done), from the mark before the receive to
//   the mark after it: on a GPU, the event wait and the device-to-device copy
//   on worker 1's stream. The fastest of the repeats is kept, as for Gloo.
// - all-reduce of a size: every worker contributes its buffer (the last one
//   sums on its stream) and waits for the sum; from worker 0's mark before
//   contributing to the latest mark after the waits, all on one time axis.
// Everything runs on the calling thread, binding each worker's device in turn.
#include <algorithm>

#include <fmt/format.h>

#include "exec/device.h"
#include "exec/errors.h"
#include "exec/executor.h"
#include "exec/transport_threads.h"

namespace baton::exec {

namespace {

struct ThreadsLink {
  std::vector<WorkerDevicePtr> devices;
  std::unique_ptr<Mailbox> mailbox;
  std::vector<std::unique_ptr<ThreadsTransport>> transports;
  std::unique_ptr<ThreadsReduceGroup> group;
  int64_t sequence = 0;

  // Runs `body` with worker w's device bound to this thread.
  template <typename F>
  auto as_worker(int w, F&& body) {
    WorkerDevice& device = *devices[static_cast<size_t>(w)];
    device.bind_thread();
    struct Unbind {
      WorkerDevice& device;
      ~Unbind() { device.unbind_thread(); }
    } unbind{device};
    return body(device);
  }
  void begin_all(const Origin& origin) {
    for (auto& device : devices) device->begin(origin);
  }
  Status settle_all() {
    for (auto& device : devices)
      if (Status s = device->settle(); !s) return s;
    return ok_status();
  }
};

at::Tensor buffer(int64_t bytes, at::Device device) {
  return at::ones({std::max<int64_t>(1, (bytes + 3) / 4)}, at::TensorOptions().dtype(at::kFloat).device(device));
}

Result<Seconds> one_way(ThreadsLink& link, int64_t bytes) {
  const MessageKey key{0, 1, Payload::kActivation, link.sequence++};
  const at::Tensor sent = link.as_worker(0, [&](WorkerDevice& d) { return buffer(bytes, d.device()); });
  const Origin origin = link.devices[0]->origin();  // the message's data are ready
  link.begin_all(origin);
  if (auto s = link.as_worker(0, [&](WorkerDevice&) { return link.transports[0]->send(key, sent); }); !s)
    return s.error();
  auto marks = link.as_worker(1, [&](WorkerDevice& d) -> Result<std::pair<int, int>> {
    const int start = d.mark();
    auto received = link.transports[1]->recv(key, {sent.numel()}, at::kFloat);
    if (!received) return received.error();
    return std::pair{start, d.mark()};
  });
  if (!marks) return marks.error();
  if (Status s = link.settle_all(); !s) return s.error();
  return link.devices[1]->seconds(marks->second) - link.devices[1]->seconds(marks->first);
}

Result<Seconds> allreduce(ThreadsLink& link, int64_t bytes, Seconds timeout) {
  const int workers = static_cast<int>(link.devices.size());
  std::vector<at::Tensor> buffers;
  for (int w = 0; w < workers; ++w)
    buffers.push_back(link.as_worker(w, [&](WorkerDevice& d) { return buffer(bytes, d.device()); }));
  link.begin_all(link.devices[0]->origin());
  const int start = link.devices[0]->mark();
  std::vector<PendingPtr> pending;
  for (int w = 0; w < workers; ++w) {
    auto p = link.as_worker(
        w, [&](WorkerDevice& d) { return link.group->contribute(w, buffers[static_cast<size_t>(w)], d); });
    if (!p) return p.error();
    pending.push_back(std::move(*p));
  }
  std::vector<int> ends;
  for (int w = 0; w < workers; ++w) {
    auto end = link.as_worker(w, [&](WorkerDevice& d) -> Result<int> {
      if (Status s = pending[static_cast<size_t>(w)]->wait(timeout); !s) return s.error();
      return d.mark();
    });
    if (!end) return end.error();
    ends.push_back(*end);
  }
  if (Status s = link.settle_all(); !s) return s.error();
  Seconds last = link.devices[0]->seconds(start);
  for (int w = 0; w < workers; ++w) last = max(last, link.devices[static_cast<size_t>(w)]->seconds(ends[w]));
  return last - link.devices[0]->seconds(start);
}

}  // namespace

Result<LinkMeasurement> measure_link_threads(const std::string& device, int workers, const LinkOptions& options) {
  if (workers < 2) return Error{fmt::format("link calibration needs >= 2 workers, got {}", workers)};
  try {
    ThreadsLink link;
    for (int w = 0; w < workers; ++w) {
      auto made = make_worker_device(device);
      if (!made) return made.error();
      link.devices.push_back(std::move(*made));
    }
    link.mailbox = std::make_unique<Mailbox>(workers, options.timeout);
    for (int w = 0; w < workers; ++w)
      link.transports.push_back(
          std::make_unique<ThreadsTransport>(*link.mailbox, *link.devices[static_cast<size_t>(w)]));
    link.group = std::make_unique<ThreadsReduceGroup>(workers, options.timeout);
    LinkMeasurement out;
    out.ranks = workers;
    for (const int64_t bytes : options.sizes_bytes) {
      const Bytes size(4 * std::max<int64_t>(1, (bytes + 3) / 4));
      std::vector<Seconds> one_ways;
      std::vector<Seconds> reduces;
      for (int r = 0; r < options.warmup + options.repeats; ++r) {
        auto t = one_way(link, bytes);
        if (!t) return t.error();
        auto a = allreduce(link, bytes, options.timeout);
        if (!a) return a.error();
        if (r < options.warmup) continue;
        one_ways.push_back(*t);
        reduces.push_back(*a);
      }
      const auto shorter = [](Seconds a, Seconds b) { return a.value < b.value; };
      out.point_to_point.push_back({size, *std::min_element(one_ways.begin(), one_ways.end(), shorter)});
      std::vector<Seconds> sorted = reduces;
      std::sort(sorted.begin(), sorted.end(), shorter);
      out.allreduce.push_back({size, sorted[sorted.size() / 2]});
      out.allreduce_samples.push_back(std::move(reduces));
    }
    return out;
  } catch (const std::exception& e) {
    return Error{fmt::format("link calibration on {}: {}", device, error_text(e))};
  }
}

}  // namespace baton::exec
