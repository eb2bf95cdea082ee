// Fuzzes parse_kernels, the loader of `baton kernels check`: any text must
// give MeasuredKernels or an Error, never a crash. Accepted measurements must
// write (kernels_to_json) to a document that loads again to the same rows,
// check against every shipped GPU model without a crash into finite errors
// and fractions, and a written document with a key the format does not have
// must be refused.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "sim/gpu_model.h"
#include "sim/gpu_model_check.h"
#include "sim/kernels_file.h"

namespace {

bool finite_rows(const std::vector<baton::KernelCheckRow>& rows) {
  for (const baton::KernelCheckRow& row : rows)
    if (!std::isfinite(row.error) || !std::isfinite(row.fraction_of_peak) || !std::isfinite(row.predicted.value))
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using baton::fuzz::fail;
  auto kernels = baton::parse_kernels(baton::fuzz::as_text(data, size), "fuzz.kernels.json");
  if (!kernels) return 0;
  const nlohmann::json written = baton::kernels_to_json(*kernels);
  auto again = baton::kernels_from_json(written, "rewritten");
  if (!again) fail("the written kernels load again", again.error().message);
  if (again->gemms.size() != kernels->gemms.size() || again->streams.size() != kernels->streams.size() ||
      again->device != kernels->device || again->dtype != kernels->dtype)
    fail("rewriting keeps the rows, device and dtype", written.dump());
  if (baton::kernels_to_json(*again) != written) fail("written kernels write back the same", written.dump());
  for (const std::string& name : baton::gpu_models()) {
    auto model = baton::gpu_model(name);
    if (!model) fail("a shipped GPU model loads", model.error().message);
    const baton::KernelCheck check = baton::check_kernels(*model, *kernels);
    if (check.gemms.size() != kernels->gemms.size() || check.streams.size() != kernels->streams.size())
      fail("the check has a row per measurement", name);
    if (!finite_rows(check.gemms) || !finite_rows(check.streams) || !std::isfinite(check.gemm_mape) ||
        !std::isfinite(check.stream_mape))
      fail("the check's errors and fractions are finite", written.dump());
    (void)baton::kernel_check_markdown(check, *model, *kernels);
  }
  baton::fuzz::check_unknown_key_refused(
      written, [](const nlohmann::json& document) { return baton::kernels_from_json(document, "extended"); });
  return 0;
}
