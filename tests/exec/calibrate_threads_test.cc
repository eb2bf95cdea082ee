// The threads backend's link calibration (exec/calibrate_threads.cc) and the
// device names the executor accepts, on the CPU: the measurement's shape (one
// sample per size, every repeat kept for the all-reduce), and the refusals.
#include "tests/exec/exec_test_support.h"

#include <algorithm>

namespace baton::testing {

TEST_CASE("the threads backend's link calibration keeps one sample per size and every all-reduce", "[exec]") {
  exec::LinkOptions options;
  options.sizes_bytes = {4, 4096, 1 << 20};
  options.warmup = 1;
  options.repeats = 5;
  auto measured = exec::measure_link_threads("cpu", 3, options);
  INFO((measured ? std::string() : measured.error().message));
  REQUIRE(measured.ok());
  CHECK(measured->ranks == 3);
  REQUIRE(measured->point_to_point.size() == 3);
  REQUIRE(measured->allreduce.size() == 3);
  REQUIRE(measured->allreduce_samples.size() == 3);
  CHECK(measured->loaded.empty());
  for (size_t i = 0; i < 3; ++i) {
    // Sizes are whole float32 elements: 4 B, 4 KiB and 1 MiB are.
    CHECK(measured->point_to_point[i].size.value == options.sizes_bytes[i]);
    CHECK(measured->allreduce[i].size.value == options.sizes_bytes[i]);
    CHECK(measured->point_to_point[i].time.value >= 0.0);
    std::vector<double> samples;
    for (Seconds t : measured->allreduce_samples[i]) samples.push_back(t.value);
    REQUIRE(samples.size() == 5);  // the warm-up is not kept
    std::sort(samples.begin(), samples.end());
    CHECK(samples.front() >= 0.0);
    CHECK(measured->allreduce[i].time.value == samples[2]);  // the median of 5
  }
}

TEST_CASE("the executor refuses devices it cannot use, naming them", "[exec]") {
  exec::LinkOptions options;
  auto one = exec::measure_link_threads("cpu", 1, options);
  REQUIRE_FALSE(one.ok());
  CHECK_THAT(one.error().message, Catch::Contains(">= 2 workers"));
  auto unknown = exec::measure_link_threads("gpu0", 2, options);
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.error().message, Catch::Contains("unknown device 'gpu0'"));
  auto cpu = exec::device_info("cpu");
  REQUIRE(cpu.ok());
  CHECK(cpu->description == "cpu");
  if (exec::cuda_device_count() == 0) {
    // A build without CUDA, or no GPU: the run says which, before any work.
    exec::TrainOptions train = train_options("mlp", 1);
    train.device = "cuda";
    auto run = exec::run_threads(exec_plan("0-3,3-6", Schedule::kOneFOneB, 2), train);
    REQUIRE_FALSE(run.ok());
    CHECK_THAT(run.error().message, Catch::Contains("device cuda:0"));
    auto reference = exec::train_reference(exec_plan("0-3,3-6", Schedule::kOneFOneB, 2), train);
    REQUIRE_FALSE(reference.ok());
    CHECK_THAT(reference.error().message, Catch::Contains("device cuda:0"));
  }
}

}  // namespace baton::testing
