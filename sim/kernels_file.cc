#include "sim/kernels_file.h"

#include "sim/json_fields.h"

namespace baton {

namespace {

using json = nlohmann::json;
using json_fields::FieldPath;

constexpr std::string_view kFormat = "baton.kernels.v1";

Result<MeasuredGemm> read_gemm(const json& row, const FieldPath& at) {
  if (auto ok = json_fields::check_object(row, at); !ok) return ok.error();
  if (auto ok = json_fields::check_known_keys(row, at, {"m", "n", "k", "count", "seconds"}); !ok) return ok.error();
  MeasuredGemm gemm;
  for (auto [name, field] : {std::pair{"m", &gemm.shape.m}, std::pair{"n", &gemm.shape.n},
                             std::pair{"k", &gemm.shape.k}, std::pair{"count", &gemm.shape.count}}) {
    auto value = json_fields::read_integer(row, at, name, 1);
    if (!value) return value.error();
    *field = *value;
  }
  auto seconds = json_fields::read_number(row, at, "seconds", 0.0, /*strict=*/true);
  if (!seconds) return seconds.error();
  gemm.time = Seconds(*seconds);
  return gemm;
}

Result<MeasuredStream> read_stream(const json& row, const FieldPath& at) {
  if (auto ok = json_fields::check_object(row, at); !ok) return ok.error();
  if (auto ok = json_fields::check_known_keys(row, at, {"bytes", "seconds"}); !ok) return ok.error();
  auto bytes = json_fields::read_integer(row, at, "bytes", 1);
  if (!bytes) return bytes.error();
  auto seconds = json_fields::read_number(row, at, "seconds", 0.0, /*strict=*/true);
  if (!seconds) return seconds.error();
  return MeasuredStream{*bytes, Seconds(*seconds)};
}

}  // namespace

json kernels_to_json(const MeasuredKernels& kernels) {
  json gemms = json::array();
  for (const MeasuredGemm& g : kernels.gemms)
    gemms.push_back({{"m", g.shape.m}, {"n", g.shape.n}, {"k", g.shape.k}, {"count", g.shape.count},
                     {"seconds", g.time.value}});
  json streams = json::array();
  for (const MeasuredStream& s : kernels.streams) streams.push_back({{"bytes", s.bytes}, {"seconds", s.time.value}});
  return {{"format", kFormat},   {"device", kernels.device}, {"dtype", kernels.dtype},
          {"gemms", gemms},      {"streams", streams},       {"tiny_kernel_seconds", kernels.tiny_kernel.value}};
}

Result<MeasuredKernels> kernels_from_json(const json& document, const std::string& source) {
  const FieldPath root(source);
  if (auto ok = json_fields::check_object(document, root); !ok) return ok.error();
  if (auto ok = json_fields::check_format(document, root, kFormat); !ok) return ok.error();
  if (auto ok = json_fields::check_known_keys(
          document, root, {"format", "device", "dtype", "gemms", "streams", "tiny_kernel_seconds"});
      !ok)
    return ok.error();
  MeasuredKernels kernels;
  auto device = json_fields::read_string(document, root, "device");
  if (!device) return device.error();
  kernels.device = *device;
  auto dtype = json_fields::read_string(document, root, "dtype");
  if (!dtype) return dtype.error();
  if (*dtype != "bf16" && *dtype != "fp16" && *dtype != "fp32")
    return root.field("dtype").error("must be bf16, fp16 or fp32", *dtype);
  kernels.dtype = *dtype;
  auto gemms = json_fields::read_array(document, root, "gemms", /*non_empty=*/true);
  if (!gemms) return gemms.error();
  for (size_t i = 0; i < (*gemms)->size(); ++i) {
    auto gemm = read_gemm((**gemms)[i], root.field("gemms").index(i));
    if (!gemm) return gemm.error();
    kernels.gemms.push_back(*gemm);
  }
  auto streams = json_fields::read_array(document, root, "streams", /*non_empty=*/true);
  if (!streams) return streams.error();
  for (size_t i = 0; i < (*streams)->size(); ++i) {
    auto stream = read_stream((**streams)[i], root.field("streams").index(i));
    if (!stream) return stream.error();
    kernels.streams.push_back(*stream);
  }
  auto tiny = json_fields::read_number(document, root, "tiny_kernel_seconds", 0.0, /*strict=*/true);
  if (!tiny) return tiny.error();
  kernels.tiny_kernel = Seconds(*tiny);
  return kernels;
}

Result<MeasuredKernels> parse_kernels(std::string_view text, const std::string& source) {
  auto document = json_fields::parse_json_text(text, source);
  if (!document) return document.error();
  return kernels_from_json(*document, source);
}

}  // namespace baton
