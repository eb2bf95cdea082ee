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
// Loaded exchange (options.loaded_rounds): ranks 0 and 1 run a two-stage
// pipeline of kLoadedBlock microbatches per iteration, GPipe and 1F1B in
// turn, whose forwards and backwards are small matrix products on one thread
// for a drawn time (forward from LinkOptions' range, 0.3-1.5 ms unless set,
// backward 1-2 forwards, one draw per iteration): rank 0 sends each forward's
// activation, rank 1 each backward's gradient, every message stamped with its
// steady-clock send time. As in the executor, each iteration's receives are
// posted before a barrier (of the two), so every send finds its receive
// announced. Each rank keeps, per
// message it received, when it was sent, when its wait began and when the
// wait ended (one machine: one steady clock); rank 1 hands its records to
// rank 0.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "exec/errors.h"
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

Seconds clock_now() { return Seconds(std::chrono::duration<double>(Clock::now().time_since_epoch()).count()); }

constexpr int kLoadedBlock = 8;  // microbatches per iteration of the loaded exchange

// Keeps one thread busy with small matrix products for `duration`.
void compute_for(Seconds duration, const at::Tensor& a, const at::Tensor& b) {
  const Clock::time_point end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(duration.value));
  while (Clock::now() < end) at::mm(a, b);
}

// One step of a rank's part in an iteration of the loaded exchange.
struct PipelineOp {
  enum Kind { kCompute, kSend, kWait } kind;
  int message = 0;  // kSend, kWait: microbatch index (the payload's direction follows from the rank)
  Seconds time;     // kCompute
};

// Rank `rank`'s part of one iteration: GPipe (every forward, then every
// backward) or 1F1B (rank 0 one forward ahead, then a backward per forward).
std::vector<PipelineOp> pipeline_ops(int rank, bool one_f_one_b, Seconds forward, Seconds backward) {
  const int m = kLoadedBlock;
  std::vector<PipelineOp> ops;
  const auto compute = [&](Seconds t) { ops.push_back({PipelineOp::kCompute, 0, t}); };
  const auto send = [&](int k) { ops.push_back({PipelineOp::kSend, k, Seconds()}); };
  const auto wait = [&](int k) { ops.push_back({PipelineOp::kWait, k, Seconds()}); };
  for (int k = 0; k < m; ++k) {
    if (rank == 0) {
      compute(forward);
      send(k);
      if (one_f_one_b && k > 0) {
        wait(k - 1);
        compute(backward);
      }
    } else {
      wait(k);
      compute(forward);
      if (one_f_one_b) {
        compute(backward);
        send(k);
      }
    }
  }
  for (int k = one_f_one_b ? m - 1 : 0; k < m; ++k) {
    if (rank == 0) {
      wait(k);
      compute(backward);
    } else if (!one_f_one_b) {
      compute(backward);
      send(k);
    }
  }
  return ops;
}

// Rank 1's records, moved to rank 0 (4 doubles each: bytes, sent, waited, completed).
Status gather_records(Link& link, std::vector<LoadedTransfer>& records) {
  at::Tensor flat = at::zeros({static_cast<int64_t>(4 * records.size())}, at::kDouble);
  if (link.rank == 1) {
    double* row = flat.data_ptr<double>();
    for (const LoadedTransfer& r : records)
      for (double v : {double(r.size.value), r.sent.value, r.waited.value, r.completed.value}) *row++ = v;
    return link.send(flat, 0, 999);
  }
  if (Status s = link.recv(flat, 1, 999); !s) return s;
  const double* row = flat.data_ptr<double>();
  const size_t own = records.size();
  for (size_t i = 0; i < own; ++i, row += 4)
    records.push_back({Bytes(static_cast<int64_t>(row[0])), Seconds(row[1]), Seconds(row[2]), Seconds(row[3])});
  return ok_status();
}

// One iteration of the loaded exchange; appends the messages this rank received.
Status loaded_iteration(Link& link, int iteration, int64_t bytes, Seconds forward, Seconds backward,
                        const at::Tensor& a, const at::Tensor& b, std::vector<LoadedTransfer>& records) {
  const int peer = 1 - link.rank;
  const int tag0 = 1000 + 2 * kLoadedBlock * iteration;
  const auto tag = [&](int from, int k) { return tag0 + 2 * k + from; };
  std::vector<at::Tensor> inboxes;
  std::vector<c10::intrusive_ptr<::c10d::Work>> receives, sends;
  for (int k = 0; k < kLoadedBlock; ++k) {
    inboxes.push_back(message(bytes));
    std::vector<at::Tensor> in{inboxes.back()};
    receives.push_back(link.world->recv(in, peer, tag(peer, k)));
  }
  // A barrier of ranks 0 and 1 alone (the others wait at the world's next one).
  at::Tensor token = at::zeros({1});
  if (Status st = link.rank == 0 ? link.send(token, peer, 998) : link.recv(token, peer, 998); !st) return st;
  if (Status st = link.rank == 0 ? link.recv(token, peer, 997) : link.send(token, peer, 997); !st) return st;
  const std::string from = fmt::format("rank {}", peer);
  for (const PipelineOp& op : pipeline_ops(link.rank, iteration % 2 == 1, forward, backward)) {
    if (op.kind == PipelineOp::kCompute) {
      compute_for(op.time, a, b);
    } else if (op.kind == PipelineOp::kSend) {
      at::Tensor outbox = message(bytes);
      const double stamp = clock_now().value;
      std::memcpy(outbox.data_ptr(), &stamp, sizeof stamp);
      std::vector<at::Tensor> out{outbox};
      sends.push_back(link.world->send(out, peer, tag(link.rank, op.message)));
    } else {
      const Seconds waited = clock_now();
      const size_t k = static_cast<size_t>(op.message);
      if (Status st = wait_work(receives[k], link.timeout, "receive from " + from, from); !st) return st;
      const Seconds completed = clock_now();
      double sent = 0.0;
      std::memcpy(&sent, inboxes[k].data_ptr(), sizeof sent);
      records.push_back({Bytes(inboxes[k].nbytes()), Seconds(sent), waited, completed});
    }
  }
  for (auto& work : sends)
    if (Status st = wait_work(work, link.timeout, "send to " + from, from); !st) return st;
  return ok_status();
}

// The loaded exchange between ranks 0 and 1 (see the top of the file): on
// rank 0, every message either rank received.
Result<std::vector<LoadedTransfer>> loaded_exchange(Link& link, const LinkOptions& options,
                                                    const std::vector<int64_t>& sizes) {
  std::mt19937_64 draw(17);  // the same draws on both ranks
  std::uniform_real_distribution<double> forward_ms(options.loaded_forward_min.ms(), options.loaded_forward_max.ms());
  std::uniform_real_distribution<double> backward_ratio(1.0, 2.0);
  const at::Tensor a = at::rand({64, 64});  // the compute's operands
  const at::Tensor b = at::rand({64, 64});
  std::vector<LoadedTransfer> records;
  const int iterations = (options.loaded_rounds + kLoadedBlock - 1) / kLoadedBlock;
  for (int i = 0; i < iterations; ++i) {
    const Seconds forward = Seconds::from_ms(forward_ms(draw));
    const Seconds backward = forward * backward_ratio(draw);
    const int64_t bytes = sizes[static_cast<size_t>(i) % sizes.size()];
    if (Status st = loaded_iteration(link, i, bytes, forward, backward, a, b, records); !st) return st.error();
  }
  if (Status st = gather_records(link, records); !st) return st.error();
  return records;
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
    out.gloo_io = gloo_io_name(groups->io);
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
    if (options.loaded_rounds > 0 && env.rank <= 1) {
      std::vector<int64_t> sizes;
      for (const int64_t bytes : options.sizes_bytes)
        if (bytes >= (1 << 10) && bytes <= (1 << 20)) sizes.push_back(bytes);
      if (sizes.empty()) sizes.push_back(16 << 10);
      auto loaded = loaded_exchange(link, options, sizes);
      if (!loaded) return loaded.error();
      out.loaded = std::move(*loaded);
    }
    if (Status s = link.barrier(); !s) return s.error();
    if (env.rank != 0) return LinkMeasurement{env.world_size, {}, {}, {}, {}, out.gloo_io};
    return out;
  } catch (const std::exception& e) {
    return Error{fmt::format("rank {}: link calibration: {}", env.rank, error_text(e))};
  }
}

}  // namespace baton::exec
