// Link calibration over c10d Gloo: the point-to-point and all-reduce times the
// simulator's link model is fitted to (sim/link_fit.h).
//
// Point to point: for each size, rank 0 sends a float32 tensor of that many
// bytes (rounded up to 4) to rank 1 and waits for the same bytes back; one
// round trip is timed on rank 0's steady clock, the one-way time is half the
// undisturbed round trip, the fastest of the repeats (noise only adds time:
// on a busy 2-core machine a preempted rank turns a 4-byte median into
// milliseconds, more than a 4 MiB transfer takes, and the fit's slope then
// comes out negative; even the 0.1 quantile, the 2nd-3rd fastest of 15, was
// seen disturbed so, once in many runs). Tags: 2 * size index (there) and 2 * size index + 1 (back); every
// round trip waits for the previous one, so equal tags never overlap.
// All-reduce: every rank joins, over a group built as a replicated stage's
// (connect_subgroup: the executor's all-reduces run on such a group, with its
// own Gloo device and I/O thread), a barrier before each size, each
// all-reduce timed from issue to completion on rank 0; all of them are kept
// (on the 2-core machines a part of them wait 2-4 ms longer than the rest).
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "exec/executor.h"
#include "exec/transport_gloo.h"

namespace baton::exec {

namespace {

using Clock = std::chrono::steady_clock;

Seconds median(std::vector<Seconds> values) {
  std::sort(values.begin(), values.end(), [](Seconds a, Seconds b) { return a.value < b.value; });
  return values[values.size() / 2];
}

at::Tensor message(int64_t bytes) {
  return at::zeros({std::max<int64_t>(1, (bytes + 3) / 4)}, at::TensorOptions().dtype(at::kFloat));
}

struct Link {
  c10::intrusive_ptr<compat::GlooGroup> world;
  c10::intrusive_ptr<compat::GlooGroup> reduce;  // all ranks, as a replicated stage's group
  Seconds timeout;
  int rank = 0;

  Status send(at::Tensor& tensor, int peer, int tag) {
    std::vector<at::Tensor> buffers{tensor};
    return wait_work(world->send(buffers, peer, tag), timeout, fmt::format("send to rank {}", peer),
                     fmt::format("rank {}", peer));
  }
  Status recv(at::Tensor& tensor, int peer, int tag) {
    std::vector<at::Tensor> buffers{tensor};
    return wait_work(world->recv(buffers, peer, tag), timeout, fmt::format("receive from rank {}", peer),
                     fmt::format("rank {}", peer));
  }
  Status allreduce(at::Tensor& tensor) {
    std::vector<at::Tensor> buffers{tensor};
    return wait_work(reduce->allreduce(buffers), timeout, "all-reduce", "one of the other ranks");
  }
  Status barrier() {
    return wait_work(world->barrier(), timeout, fmt::format("rank {}: barrier", rank), "one of the other ranks");
  }
};

// One size's round trips; rank 0 returns the one-way time, rank 1 echoes.
Result<Seconds> ping_pong(Link& link, int64_t bytes, int tag, const LinkOptions& options) {
  at::Tensor buffer = message(bytes);
  std::vector<Seconds> round_trips;
  for (int i = 0; i < options.warmup + options.repeats; ++i) {
    if (link.rank == 1) {
      if (Status s = link.recv(buffer, 0, tag); !s) return s.error();
      if (Status s = link.send(buffer, 0, tag + 1); !s) return s.error();
      continue;
    }
    const Clock::time_point start = Clock::now();
    if (Status s = link.send(buffer, 1, tag); !s) return s.error();
    if (Status s = link.recv(buffer, 1, tag + 1); !s) return s.error();
    if (i >= options.warmup) round_trips.emplace_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  if (link.rank != 0) return Seconds(0);
  std::vector<double> values;
  for (const Seconds t : round_trips) values.push_back(t.value);
  return Seconds(*std::min_element(values.begin(), values.end()) * 0.5);
}

// Every measured all-reduce of one size, in the order they ran.
Result<std::vector<Seconds>> time_allreduce(Link& link, int64_t bytes, const LinkOptions& options) {
  at::Tensor buffer = message(bytes);
  std::vector<Seconds> times;
  if (Status s = link.barrier(); !s) return s.error();
  for (int i = 0; i < options.warmup + options.repeats; ++i) {
    const Clock::time_point start = Clock::now();
    if (Status s = link.allreduce(buffer); !s) return s.error();
    if (i >= options.warmup) times.emplace_back(std::chrono::duration<double>(Clock::now() - start).count());
    buffer.zero_();
  }
  return times;
}

}  // namespace

Result<LinkMeasurement> measure_link_rank(const RankEnv& env, const LinkOptions& options) {
  if (env.world_size < 2) return Error{"link calibration needs at least 2 ranks (WORLD_SIZE >= 2)"};
  if (options.repeats < 1 || options.sizes_bytes.size() < 2)
    return Error{"link calibration needs >= 1 repeat and >= 2 message sizes"};
  at::set_num_threads(1);
  try {
    auto groups = connect_world(env, options.timeout);
    if (!groups) return groups.error();
    auto reduce = connect_subgroup(*groups, 0, env.rank, env.world_size, options.timeout, env.master_addr);
    if (!reduce) return reduce.error();
    Link link{groups->world, *reduce, options.timeout, env.rank};
    LinkMeasurement out;
    out.ranks = env.world_size;
    for (size_t i = 0; i < options.sizes_bytes.size(); ++i) {
      const int64_t bytes = options.sizes_bytes[i];
      if (env.rank <= 1) {
        auto one_way = ping_pong(link, bytes, static_cast<int>(2 * i), options);
        if (!one_way) return one_way.error();
        out.point_to_point.push_back({Bytes(4 * message(bytes).numel()), *one_way});
      }
      if (Status s = link.barrier(); !s) return s.error();
    }
    for (const int64_t bytes : options.sizes_bytes) {
      auto times = time_allreduce(link, bytes, options);
      if (!times) return times.error();
      out.allreduce.push_back({Bytes(4 * message(bytes).numel()), median(*times)});
      out.allreduce_samples.push_back(std::move(*times));
    }
    if (Status s = link.barrier(); !s) return s.error();
    if (env.rank != 0) return LinkMeasurement{env.world_size, {}, {}, {}};
    return out;
  } catch (const std::exception& e) {
    return Error{fmt::format("rank {}: link calibration: {}", env.rank, e.what())};
  }
}

}  // namespace baton::exec
