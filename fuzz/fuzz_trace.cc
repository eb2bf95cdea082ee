// Fuzzes parse_chrome_trace, the reader behind `baton compare` and the
// measured traces `validate` reads back: any text must give a Trace or an
// Error, never a crash. An accepted trace must write (trace_to_chrome_json)
// to a document that loads again with the same workers, stages and spans and
// writes back to the same text; compared with itself every span must pair
// and every figure must be equal on both sides; and a written document with
// a key the format does not have must be refused.
#include <cstddef>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "fuzz/fuzz_support.h"
#include "sim/trace_compare.h"
#include "sim/trace_reader.h"
#include "sim/trace_writers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using baton::fuzz::fail;
  auto trace = baton::parse_chrome_trace(baton::fuzz::as_text(data, size), "fuzz.trace.json");
  if (!trace) return 0;
  if (baton::makespan(*trace).value < 0) fail("a makespan is never negative", "");
  const baton::TraceShape shape = baton::trace_shape(*trace);
  if (shape.spans > static_cast<int>(trace->spans.size())) fail("the shape counts no more spans than there are", "");

  const std::string written = baton::trace_to_chrome_json(*trace);
  auto again = baton::parse_chrome_trace(written, "rewritten");
  if (!again) fail("the written trace loads again", again.error().message);
  if (again->spans.size() != trace->spans.size() || again->workers.size() != trace->workers.size() ||
      again->num_stages != trace->num_stages)
    fail("rewriting keeps the spans, workers and stages",
         fmt::format("{} / {} spans, {} / {} workers, {} / {} stages", trace->spans.size(), again->spans.size(),
                     trace->workers.size(), again->workers.size(), trace->num_stages, again->num_stages));
  if (!(baton::trace_shape(*again) == shape)) fail("rewriting keeps the shape", "");
  if (baton::trace_to_chrome_json(*again) != written) fail("a written trace writes back to the same text", written);

  const baton::TraceComparison self = baton::compare_traces(*trace, *trace);
  if (self.only_predicted != 0 || self.only_measured != 0)
    fail("a trace compared with itself pairs every span",
         fmt::format("{} paired, {} only predicted, {} only measured", self.paired, self.only_predicted,
                     self.only_measured));
  if (self.iteration.predicted != self.iteration.measured) fail("its iteration equals itself", "");
  for (const auto& [kind, figure] : self.kinds)
    if (figure.predicted != figure.measured) fail("each kind's mean equals itself", kind);

  baton::fuzz::check_unknown_key_refused(nlohmann::json::parse(written), [](const nlohmann::json& document) {
    return baton::trace_from_chrome_json(document, "extended");
  });
  return 0;
}
