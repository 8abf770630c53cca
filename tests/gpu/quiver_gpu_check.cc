// quiver_gpu_check: the CUDA backend's correctness checks and ceilings in one program, for a short
// run on a GPU machine (no gtest, no server, no tokenizer: models are fed token ids). Each stage
// writes one JSON report, also when it fails, so that a run that dies half-way still says how far
// it got (the long engine stages also write it between their parts, marked "complete": false):
//
//   quiver_gpu_check --probe
//       device name, SMs, memory, driver / runtime; exit 0 when a device is usable, 2 otherwise.
//   quiver_gpu_check --stage=ceilings|kernels|attention|graphs|models|engine --json FILE
//                    [--quick] [--ceilings FILE_OR_DIR] [--fixtures DIR] [--work DIR]
//       runs one stage and writes FILE: {"stage", "ok", "complete", "quick", "device", "error",
//       "metrics", "checks": [{"name", "ok", "value", "limit", "compare", "goal", ...}], ...}.
//       Exit 0 when every check passed, 1 when one failed (goal checks are recorded, never fail
//       a stage), 2 when the device is unusable. --ceilings names the ceilings report whose
//       bf16 GEMM rate the attention and engine stages compare with (default: FILE's folder);
//       --fixtures the tree's tests/fixtures (default, from the repository root); --work a
//       folder for generated model folders (about 1.3 GB; the models and engine stages share
//       them) and peer_input.json (default /tmp/quiver-gpu-check).
//   quiver_gpu_check --summary DIR
//       reads DIR/{ceilings,kernels,attention,graphs,models,engine,peer}.json where present and
//       prints a table of their key numbers, failed checks and goals; exit 0 when every report
//       found is ok, 1 when one is not, 2 when none was found.
//
// --quick shrinks sizes and repetitions (for compute-sanitizer). Every CUDA call is checked; a
// failed call fails its check (with the absl::Status message) and the program goes on.
//
// Stages: ceilings (D2D copy GB/s, cuBLASLt bf16 8192³ TFLOP/s: the peak later stages compare
// with); kernels (every launcher of kernels.h and BlasLt::Gemm against host f64 references, f32
// and bf16 activations, odd sizes, NaN-poisoned outputs); attention (the varlen kernel and
// FlashInfer FA2 / FA3 against ReferenceAttention, then timings and the fastest backend per
// shape); graphs (a 28-layer synthetic decoder loop: CUDA-graph replay bit-equal to eager,
// capture cost, eager vs replay latency); models and engine (engine_stages.h: the tiny fixtures
// and a Qwen3-0.6B-shaped model through engine::Engine against Hugging Face and the CPU engine;
// latency, throughput, MFU, a token sweep and concurrency on the MiniLM and Qwen3-0.6B shapes).
#include <cuda_runtime.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "common/json.h"
#include "common/json_writer.h"
#include "common/status.h"
#include "engine/base/dtype.h"
#include "engine/base/half.h"
#include "engine/base/op_types.h"
#include "engine/kernels/cuda/attention.h"
#include "engine/kernels/cuda/attention_flashinfer.h"
#include "engine/kernels/cuda/blaslt.h"
#include "engine/kernels/cuda/kernels.h"
#include "engine/kernels/cuda/memory.h"
#include "engine/kernels/cuda/status.h"
#include "tests/gpu/check_common.h"
#include "tests/gpu/engine_stages.h"

namespace quiver::gpu_check {
namespace {

namespace cu = ::quiver::engine::cuda;
using ::quiver::engine::Bf16ToFloat;
using ::quiver::engine::DType;
using ::quiver::engine::FloatToBf16;
using ::quiver::engine::PoolMode;
using ::quiver::engine::RotaryLayout;

constexpr int kExitOk = 0, kExitFailed = 1, kExitNoDevice = 2;

// ---------------------------------------------------------------------------------------------
// Device, buffers, timing.

// The device's description; UNAVAILABLE (or the failing call's status) when it cannot run work.
// Also runs one of the library's kernels (f32 -> bf16 of a few values), so that a build without
// code for this architecture is refused here rather than stage by stage.
absl::StatusOr<DeviceInfo> ProbeDevice() {
  DeviceInfo info;
  int count = 0;
  QUIVER_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (count <= 0) return absl::UnavailableError("no CUDA device");
  QUIVER_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaDriverGetVersion(&info.driver_version));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaRuntimeGetVersion(&info.runtime_version));
  cudaDeviceProp prop;
  QUIVER_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, 0));
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  QUIVER_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));

  constexpr int kN = 16;
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer in, cu::DeviceBuffer::Allocate(kN * sizeof(float)));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer out, cu::DeviceBuffer::Allocate(kN * sizeof(uint16_t)));
  float host_in[kN];
  uint16_t host_out[kN];
  for (int i = 0; i < kN; ++i) host_in[i] = 0.37f * static_cast<float>(i - 5);
  QUIVER_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(in.data(), host_in, sizeof(host_in), cudaMemcpyHostToDevice));
  QUIVER_CUDA_RETURN_IF_ERROR(cu::F32ToBf16(in.as<float>(), out.data(), kN, nullptr));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  QUIVER_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(host_out, out.data(), sizeof(host_out), cudaMemcpyDeviceToHost));
  for (int i = 0; i < kN; ++i) {
    if (host_out[i] != FloatToBf16(host_in[i])) {
      return absl::InternalError(absl::StrCat("probe kernel F32ToBf16 wrote a wrong value at ", i));
    }
  }
  return info;
}

void PrintDevice(const DeviceInfo& info) {
  std::printf("device: %s (compute capability %d.%d), %d SMs, %.0f MiB total, %.0f MiB free\n",
              info.name.c_str(), info.cc_major, info.cc_minor, info.sm_count,
              static_cast<double>(info.total_bytes) / (1 << 20),
              static_cast<double>(info.free_bytes) / (1 << 20));
  std::printf("driver %d.%d, runtime %d.%d\n", info.driver_version / 1000,
              (info.driver_version % 1000) / 10, info.runtime_version / 1000,
              (info.runtime_version % 1000) / 10);
}

// n bf16 values uniform in [-scale, scale), 4 per random word.
std::vector<uint16_t> RandomBf16(size_t n, uint64_t seed, float scale) {
  std::vector<uint16_t> out(n);
  Rng rng(seed);
  const float step = scale / 32768.0f;
  for (size_t i = 0; i < n; i += 4) {
    const uint64_t bits = rng.Next();
    for (size_t j = 0; j < 4 && i + j < n; ++j) {
      const auto v = static_cast<int16_t>(static_cast<uint16_t>(bits >> (16 * j)));
      out[i + j] = FloatToBf16((static_cast<float>(v) + 0.5f) * step);  // never exactly zero
    }
  }
  return out;
}

// n floats uniform in [lo, hi); rounded to bf16 values when `round_bf16` (so that a bf16 upload
// holds exactly what the host reference reads).
std::vector<float> RandomFloats(size_t n, Rng& rng, float lo, float hi, bool round_bf16) {
  std::vector<float> out(n);
  for (float& v : out) {
    v = rng.UniformF(lo, hi);
    if (round_bf16) v = Bf16ToFloat(FloatToBf16(v));
  }
  return out;
}

size_t ElementBytes(DType dtype) { return dtype == DType::kBF16 ? 2 : 4; }
const char* ActName(DType dtype) { return dtype == DType::kBF16 ? "bf16" : "f32"; }

// Floats as f32 or bf16 bytes.
std::vector<uint8_t> Encode(std::span<const float> values, DType dtype) {
  std::vector<uint8_t> out(values.size() * ElementBytes(dtype));
  if (dtype == DType::kBF16) {
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t b = FloatToBf16(values[i]);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  } else {
    std::memcpy(out.data(), values.data(), out.size());
  }
  return out;
}

// Element i of f32 or bf16 bytes.
float DecodeAt(const std::vector<uint8_t>& bytes, DType dtype, size_t i) {
  if (dtype == DType::kBF16) {
    uint16_t b;
    std::memcpy(&b, bytes.data() + 2 * i, 2);
    return Bf16ToFloat(b);
  }
  float f;
  std::memcpy(&f, bytes.data() + 4 * i, 4);
  return f;
}

// The dense [rows, n] matrix at element `offset` with row stride `stride` of f32 / bf16 bytes.
std::vector<float> ReadRows(const std::vector<uint8_t>& bytes, DType dtype, int64_t rows, int64_t n,
                            int64_t stride, int64_t offset = 0) {
  std::vector<float> out(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      out[static_cast<size_t>(r * n + j)] =
          DecodeAt(bytes, dtype, static_cast<size_t>(offset + r * stride + j));
    }
  }
  return out;
}

// max |out - ref| / max(1, |ref|); infinity for a NaN or infinite output, or a size mismatch.
double MaxRelError(std::span<const float> out, std::span<const double> ref) {
  if (out.size() != ref.size()) return kInf;
  double worst = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) return kInf;
    worst = std::max(worst, std::fabs(out[i] - ref[i]) / std::max(1.0, std::fabs(ref[i])));
  }
  return worst;
}

// The test's device context: one stream, one cuBLASLt instance.
struct Gpu {
  cu::Stream stream;
  std::unique_ptr<cu::BlasLt> blaslt;
  cudaStream_t s() const { return stream.get(); }
};

absl::StatusOr<Gpu> MakeGpu() {
  Gpu gpu;
  QUIVER_ASSIGN_OR_RETURN(gpu.stream, cu::Stream::Create());
  QUIVER_ASSIGN_OR_RETURN(gpu.blaslt, cu::BlasLt::Create());
  return gpu;
}

// Copies go through the test stream (non-blocking: the legacy-stream cudaMemcpy / cudaMemset
// would not order against it) and wait for it.
absl::StatusOr<cu::DeviceBuffer> ToDevice(const void* data, size_t bytes, cudaStream_t stream) {
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer buffer, cu::DeviceBuffer::Allocate(bytes));
  QUIVER_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(buffer.data(), data, bytes, cudaMemcpyHostToDevice, stream));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return buffer;
}
template <typename T>
absl::StatusOr<cu::DeviceBuffer> ToDevice(const std::vector<T>& values, cudaStream_t stream) {
  return ToDevice(values.data(), values.size() * sizeof(T), stream);
}
// `bytes` of device memory filled with 0xFF (NaN as f32 and as bf16).
absl::StatusOr<cu::DeviceBuffer> PoisonedBuffer(size_t bytes, cudaStream_t stream) {
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer buffer, cu::DeviceBuffer::Allocate(bytes));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffer.data(), 0xFF, bytes, stream));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return buffer;
}
absl::Status Poison(const cu::DeviceBuffer& buffer, cudaStream_t stream) {
  QUIVER_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffer.data(), 0xFF, buffer.bytes(), stream));
  return absl::OkStatus();
}
// Waits for the stream, then copies the whole buffer back.
absl::StatusOr<std::vector<uint8_t>> ToHost(const cu::DeviceBuffer& buffer, cudaStream_t stream) {
  std::vector<uint8_t> out(buffer.bytes());
  QUIVER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  QUIVER_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out.data(), buffer.data(), buffer.bytes(), cudaMemcpyDeviceToHost, stream));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return out;
}

// Milliseconds of each of `reps` runs of `run`, each between its own pair of timing events; the
// runs are enqueued back to back and waited for once, so host enqueue time shows where it is
// longer than the device's (the eager layer loop) and nowhere else.
absl::StatusOr<std::vector<float>> TimeRuns(int reps, cudaStream_t stream,
                                            const std::function<absl::Status()>& run) {
  std::vector<cu::Event> starts, stops;
  for (int i = 0; i < reps; ++i) {
    QUIVER_ASSIGN_OR_RETURN(cu::Event start, cu::Event::Create(cu::Event::Kind::kTiming));
    QUIVER_ASSIGN_OR_RETURN(cu::Event stop, cu::Event::Create(cu::Event::Kind::kTiming));
    starts.push_back(std::move(start));
    stops.push_back(std::move(stop));
  }
  for (int i = 0; i < reps; ++i) {
    QUIVER_RETURN_IF_ERROR(starts[i].Record(stream));
    QUIVER_RETURN_IF_ERROR(run());
    QUIVER_RETURN_IF_ERROR(stops[i].Record(stream));
  }
  QUIVER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    QUIVER_ASSIGN_OR_RETURN(float elapsed, stops[i].MillisecondsSince(starts[i]));
    ms.push_back(elapsed);
  }
  return ms;
}

// A launcher's cudaError_t as a status.
absl::Status Launch(cudaError_t error, std::string_view what) {
  return cu::CudaStatus(error, what);
}

// ---------------------------------------------------------------------------------------------
// Stage 1: ceilings.

// STAGE_CEILINGS
// Device-to-device copy bandwidth: `bytes` copied per run, counted twice (read + write).
absl::Status MeasureD2d(Report& report, Gpu& gpu, size_t bytes, int reps) {
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer src, cu::DeviceBuffer::Allocate(bytes));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer dst, cu::DeviceBuffer::Allocate(bytes));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(src.data(), 0x5A, bytes, gpu.s()));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst.data(), 0x00, bytes, gpu.s()));
  auto copy = [&]() -> absl::Status {
    QUIVER_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, gpu.s()));
    return absl::OkStatus();
  };
  QUIVER_RETURN_IF_ERROR(copy());  // warm-up
  QUIVER_ASSIGN_OR_RETURN(std::vector<float> ms, TimeRuns(reps, gpu.s(), copy));
  const double median_ms = Median(ms);
  report.Metric("d2d_gbps", 2.0 * static_cast<double>(bytes) / (median_ms * 1e-3) / 1e9);
  report.Metric("d2d_ms", median_ms);
  // The copy really happened: the last MiB of the destination holds the source's bytes.
  const size_t tail = std::min<size_t>(bytes, size_t{1} << 20);
  std::vector<uint8_t> host(tail);
  QUIVER_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.data(), dst.as<uint8_t>() + (bytes - tail), tail,
                                              cudaMemcpyDeviceToHost, gpu.s()));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(gpu.s()));
  const auto wrong = static_cast<double>(
      std::count_if(host.begin(), host.end(), [](uint8_t b) { return b != 0x5A; }));
  report.Expect("d2d_copy_arrived_wrong_bytes", wrong, 0.0);
  return absl::OkStatus();
}

// cuBLASLt bf16 y [n, n] = x · wᵀ on random data: the peak matrix throughput later stages are
// measured against. A few output elements are checked against a host f64 dot product so that the
// ceiling is a real product's.
absl::Status MeasureGemm(Report& report, Gpu& gpu, int64_t n, int reps) {
  const size_t elements = static_cast<size_t>(n * n);
  const std::vector<uint16_t> x = RandomBf16(elements, 11, 1.0f);
  const std::vector<uint16_t> w = RandomBf16(elements, 12, 1.0f);
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer dx, ToDevice(x, gpu.s()));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer dw, ToDevice(w, gpu.s()));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer dy, PoisonedBuffer(elements * 2, gpu.s()));
  cu::GemmArgs args;
  args.x = dx.data();
  args.w = dw.data();
  args.y = dy.data();
  args.m = args.n = args.k = n;
  args.ldx = args.ldw = args.ldy = n;
  auto gemm = [&]() { return gpu.blaslt->Gemm(args, gpu.s()); };
  for (int i = 0; i < 3; ++i) QUIVER_RETURN_IF_ERROR(gemm());  // algorithm choice, clocks up
  QUIVER_ASSIGN_OR_RETURN(std::vector<float> ms, TimeRuns(reps, gpu.s(), gemm));
  const double median_ms = Median(ms);
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  report.Metric("gemm_tflops", flops / (median_ms * 1e-3) / 1e12);
  report.Metric("gemm_ms", median_ms);
  report.Metric("gemm_n", static_cast<double>(n));

  std::vector<uint16_t> y(elements);
  QUIVER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(gpu.s()));
  QUIVER_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(y.data(), dy.data(), elements * 2, cudaMemcpyDeviceToHost, gpu.s()));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(gpu.s()));
  Rng rng(13);
  std::vector<float> out;
  std::vector<double> ref;
  for (int sample = 0; sample < 64; ++sample) {
    const int64_t r = rng.Int(0, n - 1), c = rng.Int(0, n - 1);
    double dot = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      dot += static_cast<double>(Bf16ToFloat(x[r * n + i])) * Bf16ToFloat(w[c * n + i]);
    }
    ref.push_back(dot);
    out.push_back(Bf16ToFloat(y[r * n + c]));
  }
  report.Expect(absl::StrCat("gemm_", n, "_sampled_max_rel_err"), MaxRelError(out, ref), 2e-2);
  return absl::OkStatus();
}

void RunCeilings(Report& report, Gpu& gpu, const Options& options) {
  const size_t copy_bytes = options.quick ? size_t{64} << 20 : size_t{1} << 30;
  const int64_t gemm_n = options.quick ? 1024 : 8192;
  const int reps = options.quick ? 3 : 20;
  if (absl::Status s = MeasureD2d(report, gpu, copy_bytes, reps); !s.ok()) {
    report.Error("d2d_copy", s);
  }
  if (absl::Status s = MeasureGemm(report, gpu, gemm_n, reps); !s.ok()) {
    report.Error("gemm_bf16", s);
  }
}

// ---------------------------------------------------------------------------------------------
// Stage 2: kernels.

// STAGE_KERNELS
constexpr int64_t kRows = 13;  // token rows of every kernel check: odd, not a warp multiple

double Tolerance(DType act) { return act == DType::kBF16 ? 2e-2 : 1e-4; }
bool IsBf16(DType act) { return act == DType::kBF16; }

absl::StatusOr<cu::DeviceBuffer> ToDeviceAs(std::span<const float> values, DType dtype,
                                            cudaStream_t stream) {
  return ToDevice(Encode(values, dtype), stream);
}

std::vector<double> ToDouble(std::span<const float> values) {
  return std::vector<double>(values.begin(), values.end());
}

// norm(x) of one row in f64: LayerNorm (x - mean) / √(var + eps) · gamma + beta (beta null: 0),
// RmsNorm x / √(mean(x²) + eps) · gamma (no beta: the kernels read it for LayerNorm only, as
// kernels.h says), kNone x.
std::vector<double> RefNorm(std::span<const double> x, cu::NormKind norm, const float* gamma,
                            const float* beta, double eps) {
  const auto n = static_cast<double>(x.size());
  std::vector<double> y(x.begin(), x.end());
  if (norm == cu::NormKind::kNone) return y;
  double mean = 0.0, sum_sq = 0.0;
  if (norm == cu::NormKind::kLayerNorm) {
    for (double v : x) mean += v;
    mean /= n;
    for (double v : x) sum_sq += (v - mean) * (v - mean);
  } else {
    for (double v : x) sum_sq += v * v;
  }
  const double inv = 1.0 / std::sqrt(sum_sq / n + eps);
  for (size_t j = 0; j < x.size(); ++j) {
    const double shift = norm == cu::NormKind::kLayerNorm && beta != nullptr ? beta[j] : 0.0;
    y[j] = (x[j] - mean) * inv * gamma[j] + shift;
  }
  return y;
}

const char* NormName(cu::NormKind norm) {
  switch (norm) {
    case cu::NormKind::kNone:
      return "none";
    case cu::NormKind::kLayerNorm:
      return "layernorm";
    case cu::NormKind::kRmsNorm:
      return "rmsnorm";
  }
  return "?";
}

// Embedding: word + position + type tables (table_dtype), every output given.
absl::StatusOr<double> CheckEmbedding(Gpu& gpu, DType act, DType table_dtype, int64_t hidden,
                                      cu::NormKind norm, uint64_t seed) {
  Rng rng(seed);
  constexpr int64_t kVocab = 50, kPositions = 40, kTypes = 2;
  const bool bf16 = IsBf16(table_dtype);
  const std::vector<float> word = RandomFloats(kVocab * hidden, rng, -1, 1, bf16);
  const std::vector<float> position = RandomFloats(kPositions * hidden, rng, -1, 1, bf16);
  const std::vector<float> type = RandomFloats(kTypes * hidden, rng, -1, 1, bf16);
  const std::vector<float> gamma = RandomFloats(hidden, rng, 0.5f, 1.5f, false);
  const std::vector<float> beta = RandomFloats(hidden, rng, -0.5f, 0.5f, false);
  std::vector<int32_t> ids(kRows), positions(kRows), type_ids(kRows);
  for (int64_t t = 0; t < kRows; ++t) {
    ids[t] = static_cast<int32_t>(rng.Int(0, kVocab - 1));
    positions[t] = static_cast<int32_t>(rng.Int(0, kPositions - 1));
    type_ids[t] = static_cast<int32_t>(rng.Int(0, kTypes - 1));
  }
  const cudaStream_t s = gpu.s();
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_word, ToDeviceAs(word, table_dtype, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_position, ToDeviceAs(position, table_dtype, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_type, ToDeviceAs(type, table_dtype, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_gamma, ToDevice(gamma, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_beta, ToDevice(beta, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_ids, ToDevice(ids, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_positions, ToDevice(positions, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_type_ids, ToDevice(type_ids, s));
  const size_t n = static_cast<size_t>(kRows * hidden);
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_sum, PoisonedBuffer(n * 4, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_normed_f32, PoisonedBuffer(n * 4, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_normed, PoisonedBuffer(n * ElementBytes(act), s));

  cu::EmbeddingArgs args;
  args.ids = d_ids.as<int32_t>();
  args.positions = d_positions.as<int32_t>();
  args.type_ids = d_type_ids.as<int32_t>();
  args.word = d_word.data();
  args.position = d_position.data();
  args.type = d_type.data();
  args.table_dtype = table_dtype;
  args.norm = norm;
  args.gamma = d_gamma.as<float>();
  args.beta = d_beta.as<float>();
  args.eps = 1e-5f;
  args.num_tokens = kRows;
  args.hidden = hidden;
  args.sum_f32 = d_sum.as<float>();
  args.normed_f32 = d_normed_f32.as<float>();
  args.normed = d_normed.data();
  args.act = act;
  QUIVER_RETURN_IF_ERROR(Launch(cu::Embedding(args, s), "Embedding"));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> sum_bytes, ToHost(d_sum, s));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> normed_f32_bytes, ToHost(d_normed_f32, s));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> normed_bytes, ToHost(d_normed, s));

  std::vector<double> ref_sum(n), ref_normed(n);
  for (int64_t t = 0; t < kRows; ++t) {
    std::vector<double> row(static_cast<size_t>(hidden));
    for (int64_t j = 0; j < hidden; ++j) {
      row[j] = static_cast<double>(word[ids[t] * hidden + j]) +
               position[positions[t] * hidden + j] + type[type_ids[t] * hidden + j];
    }
    const std::vector<double> normed = RefNorm(row, norm, gamma.data(), beta.data(), args.eps);
    std::copy(row.begin(), row.end(), ref_sum.begin() + t * hidden);
    std::copy(normed.begin(), normed.end(), ref_normed.begin() + t * hidden);
  }
  return std::max(
      {MaxRelError(ReadRows(sum_bytes, DType::kF32, kRows, hidden, hidden), ref_sum),
       MaxRelError(ReadRows(normed_f32_bytes, DType::kF32, kRows, hidden, hidden), ref_normed),
       MaxRelError(ReadRows(normed_bytes, act, kRows, hidden, hidden), ref_normed)});
}

// AddNorm: residual += add (strided, act) + bias, normed (strided, act) = norm(residual); with
// `post_ln` the residual becomes the normed row too.
absl::StatusOr<double> CheckAddNorm(Gpu& gpu, DType act, int64_t hidden, cu::NormKind norm,
                                    bool post_ln, uint64_t seed) {
  Rng rng(seed);
  const int64_t add_stride = hidden + 3, normed_stride = hidden + 5;
  const std::vector<float> residual = RandomFloats(kRows * hidden, rng, -2, 2, false);
  const std::vector<float> add = RandomFloats(kRows * add_stride, rng, -1, 1, IsBf16(act));
  const std::vector<float> bias = RandomFloats(hidden, rng, -0.5f, 0.5f, false);
  const std::vector<float> gamma = RandomFloats(hidden, rng, 0.5f, 1.5f, false);
  const std::vector<float> beta = RandomFloats(hidden, rng, -0.5f, 0.5f, false);
  const cudaStream_t s = gpu.s();
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_residual, ToDevice(residual, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_add, ToDeviceAs(add, act, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_bias, ToDevice(bias, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_gamma, ToDevice(gamma, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_beta, ToDevice(beta, s));
  QUIVER_ASSIGN_OR_RETURN(
      cu::DeviceBuffer d_normed,
      PoisonedBuffer(static_cast<size_t>(kRows * normed_stride) * ElementBytes(act), s));
  cu::AddNormArgs args;
  args.residual = d_residual.as<float>();
  args.add = d_add.data();
  args.add_stride = add_stride;
  args.bias = d_bias.as<float>();
  args.norm = norm;
  args.gamma = d_gamma.as<float>();
  args.beta = d_beta.as<float>();
  args.eps = 1e-6f;
  args.store_normed_in_residual = post_ln;
  args.normed = d_normed.data();
  args.normed_stride = normed_stride;
  args.num_tokens = kRows;
  args.hidden = hidden;
  args.act = act;
  QUIVER_RETURN_IF_ERROR(Launch(cu::AddNorm(args, s), "AddNorm"));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> residual_bytes, ToHost(d_residual, s));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> normed_bytes, ToHost(d_normed, s));

  const size_t n = static_cast<size_t>(kRows * hidden);
  std::vector<double> ref_residual(n), ref_normed(n);
  for (int64_t t = 0; t < kRows; ++t) {
    std::vector<double> row(static_cast<size_t>(hidden));
    for (int64_t j = 0; j < hidden; ++j) {
      row[j] = static_cast<double>(residual[t * hidden + j]) +
               (static_cast<double>(add[t * add_stride + j]) + bias[j]);
    }
    const std::vector<double> normed = RefNorm(row, norm, gamma.data(), beta.data(), args.eps);
    std::copy(normed.begin(), normed.end(), ref_normed.begin() + t * hidden);
    const std::vector<double>& new_residual = post_ln ? normed : row;
    std::copy(new_residual.begin(), new_residual.end(), ref_residual.begin() + t * hidden);
  }
  return std::max(
      MaxRelError(ReadRows(residual_bytes, DType::kF32, kRows, hidden, hidden), ref_residual),
      MaxRelError(ReadRows(normed_bytes, act, kRows, hidden, normed_stride), ref_normed));
}

// Norm over strided act rows, into another buffer or in place.
absl::StatusOr<double> CheckNorm(Gpu& gpu, DType act, int64_t hidden, cu::NormKind norm,
                                 bool in_place, uint64_t seed) {
  Rng rng(seed);
  const int64_t x_stride = hidden + 2;
  const int64_t out_stride = in_place ? x_stride : hidden + 4;
  const std::vector<float> x = RandomFloats(kRows * x_stride, rng, -2, 2, IsBf16(act));
  const std::vector<float> gamma = RandomFloats(hidden, rng, 0.5f, 1.5f, false);
  const std::vector<float> beta = RandomFloats(hidden, rng, -0.5f, 0.5f, false);
  const cudaStream_t s = gpu.s();
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_x, ToDeviceAs(x, act, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_gamma, ToDevice(gamma, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_beta, ToDevice(beta, s));
  cu::DeviceBuffer d_out_owned;
  if (!in_place) {
    QUIVER_ASSIGN_OR_RETURN(
        d_out_owned,
        PoisonedBuffer(static_cast<size_t>(kRows * out_stride) * ElementBytes(act), s));
  }
  const cu::DeviceBuffer& d_out = in_place ? d_x : d_out_owned;
  const float eps = 1e-5f;
  QUIVER_RETURN_IF_ERROR(
      Launch(cu::Norm(d_x.data(), x_stride, norm, d_gamma.as<float>(), d_beta.as<float>(), eps,
                      d_out.data(), out_stride, kRows, hidden, act, s),
             "Norm"));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> out_bytes, ToHost(d_out, s));
  std::vector<double> ref;
  for (int64_t t = 0; t < kRows; ++t) {
    const std::vector<double> row =
        ToDouble(std::span<const float>(x.data() + t * x_stride, static_cast<size_t>(hidden)));
    const std::vector<double> normed = RefNorm(row, norm, gamma.data(), beta.data(), eps);
    ref.insert(ref.end(), normed.begin(), normed.end());
  }
  return MaxRelError(ReadRows(out_bytes, act, kRows, hidden, out_stride), ref);
}

// HeadNormRotary on 3 heads inside a row of 6 (from head 1 on), in place; every other element of
// the buffer must keep its value. `aligned` false makes the base and the stride odd (the scalar
// path). Norm and rotary each optional.
absl::StatusOr<double> CheckHeadNormRotary(Gpu& gpu, DType act, int64_t head_dim,
                                           RotaryLayout layout, bool aligned, bool with_norm,
                                           bool with_rotary, uint64_t seed) {
  Rng rng(seed);
  constexpr int64_t kHeads = 3, kRowHeads = 6;
  const int64_t x_stride = kRowHeads * head_dim + (aligned ? 8 : 3);
  const int64_t offset = head_dim + (aligned ? 0 : 1);
  const std::vector<float> x = RandomFloats(kRows * x_stride, rng, -2, 2, IsBf16(act));
  const std::vector<float> gamma = RandomFloats(head_dim, rng, 0.5f, 1.5f, false);
  std::vector<int32_t> positions(kRows);
  for (int32_t& p : positions) p = static_cast<int32_t>(rng.Int(0, 2047));
  const cudaStream_t s = gpu.s();
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_x, ToDeviceAs(x, act, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_gamma, ToDevice(gamma, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_positions, ToDevice(positions, s));
  cu::HeadNormRotaryArgs args;
  args.x = static_cast<uint8_t*>(d_x.data()) + offset * ElementBytes(act);
  args.x_stride = x_stride;
  args.num_tokens = kRows;
  args.heads = kHeads;
  args.head_dim = head_dim;
  args.gamma = with_norm ? d_gamma.as<float>() : nullptr;
  args.eps = 1e-6f;
  args.positions = with_rotary ? d_positions.as<int32_t>() : nullptr;
  args.theta = 1000000.0;
  args.layout = layout;
  args.act = act;
  QUIVER_RETURN_IF_ERROR(Launch(cu::HeadNormRotary(args, s), "HeadNormRotary"));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> out_bytes, ToHost(d_x, s));

  std::vector<double> ref = ToDouble(x);
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < kRows; ++t) {
    for (int64_t h = 0; h < kHeads; ++h) {
      const int64_t base = t * x_stride + offset + h * head_dim;
      std::vector<double> v(ref.begin() + base, ref.begin() + base + head_dim);
      if (with_norm) {
        double sum_sq = 0.0;
        for (double e : v) sum_sq += e * e;
        const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(head_dim) + args.eps);
        for (int64_t k = 0; k < head_dim; ++k) v[k] = v[k] * inv * gamma[k];
      }
      std::vector<double> out = v;
      if (with_rotary) {
        for (int64_t i = 0; i < half; ++i) {
          // The contract's f32 angle: inv_freq = 1 / theta^(2i / head_dim), position · inv_freq.
          const float inv_freq =
              1.0f / static_cast<float>(std::pow(
                         args.theta, static_cast<double>(2 * i) / static_cast<double>(head_dim)));
          const float angle = static_cast<float>(positions[t]) * inv_freq;
          const double c = std::cos(static_cast<double>(angle));
          const double sn = std::sin(static_cast<double>(angle));
          const int64_t a = layout == RotaryLayout::kNeox ? i : 2 * i;
          const int64_t b = layout == RotaryLayout::kNeox ? i + half : 2 * i + 1;
          out[a] = v[a] * c - v[b] * sn;
          out[b] = v[b] * c + v[a] * sn;
        }
      }
      std::copy(out.begin(), out.end(), ref.begin() + base);
    }
  }
  return MaxRelError(ReadRows(out_bytes, act, 1, kRows * x_stride, 0), ref);
}

// SiluMul from strided gate_up into a strided out.
absl::StatusOr<double> CheckSiluMul(Gpu& gpu, DType act, int64_t inter, uint64_t seed) {
  Rng rng(seed);
  const int64_t gu_stride = 2 * inter + 3, out_stride = inter + 1;
  const std::vector<float> gate_up = RandomFloats(kRows * gu_stride, rng, -4, 4, IsBf16(act));
  const cudaStream_t s = gpu.s();
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_gu, ToDeviceAs(gate_up, act, s));
  QUIVER_ASSIGN_OR_RETURN(
      cu::DeviceBuffer d_out,
      PoisonedBuffer(static_cast<size_t>(kRows * out_stride) * ElementBytes(act), s));
  QUIVER_RETURN_IF_ERROR(
      Launch(cu::SiluMul(d_gu.data(), gu_stride, d_out.data(), out_stride, kRows, inter, act, s),
             "SiluMul"));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> out_bytes, ToHost(d_out, s));
  std::vector<double> ref;
  for (int64_t t = 0; t < kRows; ++t) {
    for (int64_t j = 0; j < inter; ++j) {
      const double g = gate_up[t * gu_stride + j], u = gate_up[t * gu_stride + inter + j];
      ref.push_back(g / (1.0 + std::exp(-g)) * u);
    }
  }
  return MaxRelError(ReadRows(out_bytes, act, kRows, inter, out_stride), ref);
}

const char* ActivationName(cu::Activation activation) {
  switch (activation) {
    case cu::Activation::kIdentity:
      return "identity";
    case cu::Activation::kGeluErf:
      return "gelu_erf";
    case cu::Activation::kGeluTanh:
      return "gelu_tanh";
    case cu::Activation::kTanh:
      return "tanh";
    case cu::Activation::kRelu:
      return "relu";
  }
  return "?";
}

double GeluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

double RefActivation(cu::Activation activation, double x) {
  switch (activation) {
    case cu::Activation::kIdentity:
      return x;
    case cu::Activation::kGeluErf:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case cu::Activation::kGeluTanh:
      return GeluTanh(x);
    case cu::Activation::kTanh:
      return std::tanh(x);
    case cu::Activation::kRelu:
      return x > 0 ? x : 0.0;
  }
  return kNaN;
}

// BiasActivation in place on strided rows; the row padding must keep its value.
absl::StatusOr<double> CheckBiasActivation(Gpu& gpu, DType act, int64_t n,
                                           cu::Activation activation, bool with_bias,
                                           uint64_t seed) {
  Rng rng(seed);
  const int64_t x_stride = n + 2;
  const std::vector<float> x = RandomFloats(kRows * x_stride, rng, -3, 3, IsBf16(act));
  const std::vector<float> bias = RandomFloats(n, rng, -0.5f, 0.5f, false);
  const cudaStream_t s = gpu.s();
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_x, ToDeviceAs(x, act, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_bias, ToDevice(bias, s));
  QUIVER_RETURN_IF_ERROR(
      Launch(cu::BiasActivation(d_x.data(), x_stride, with_bias ? d_bias.as<float>() : nullptr,
                                activation, kRows, n, act, s),
             "BiasActivation"));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> out_bytes, ToHost(d_x, s));
  std::vector<double> ref = ToDouble(x);
  for (int64_t t = 0; t < kRows; ++t) {
    for (int64_t j = 0; j < n; ++j) {
      double& v = ref[t * x_stride + j];
      v = RefActivation(activation, v + (with_bias ? bias[j] : 0.0));
    }
  }
  return MaxRelError(ReadRows(out_bytes, act, 1, kRows * x_stride, 0), ref);
}

const char* PoolName(PoolMode mode) {
  switch (mode) {
    case PoolMode::kCls:
      return "cls";
    case PoolMode::kMean:
      return "mean";
    case PoolMode::kLastToken:
      return "last";
    case PoolMode::kMax:
      return "max";
    case PoolMode::kMeanSqrtLen:
      return "mean_sqrt_len";
    case PoolMode::kWeightedMean:
      return "weighted_mean";
  }
  return "?";
}

// Pool over 4 token ranges of 13 strided rows (one of them a single token, two overlapping), as
// (begin, end, origin) rows: two of them count the weighted mean's weights from before their
// first token (a prompt left out of the pooling).
absl::StatusOr<double> CheckPool(Gpu& gpu, DType act, int64_t hidden, PoolMode mode,
                                 uint64_t seed) {
  Rng rng(seed);
  const int64_t stride = hidden + 1;
  const std::vector<int32_t> bounds = {0, 5, 0, 5, 6, 3, 6, 13, 6, 2, 11, 2};
  const int64_t num_rows = static_cast<int64_t>(bounds.size()) / 3;
  const std::vector<float> x = RandomFloats(kRows * stride, rng, -2, 2, IsBf16(act));
  const cudaStream_t s = gpu.s();
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_x, ToDeviceAs(x, act, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_bounds, ToDevice(bounds, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_out,
                          PoisonedBuffer(static_cast<size_t>(num_rows * hidden) * 4, s));
  QUIVER_RETURN_IF_ERROR(Launch(cu::Pool(d_x.data(), stride, d_bounds.as<int32_t>(), 3, num_rows,
                                         hidden, mode, act, d_out.as<float>(), s),
                                "Pool"));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> out_bytes, ToHost(d_out, s));
  std::vector<double> ref;
  for (int64_t r = 0; r < num_rows; ++r) {
    const int64_t begin = bounds[3 * r], end = bounds[3 * r + 1], origin = bounds[3 * r + 2];
    for (int64_t j = 0; j < hidden; ++j) {
      auto at = [&](int64_t t) { return static_cast<double>(x[t * stride + j]); };
      double v = 0.0;
      switch (mode) {
        case PoolMode::kCls:
          v = at(begin);
          break;
        case PoolMode::kLastToken:
          v = at(end - 1);
          break;
        case PoolMode::kMean:
          for (int64_t t = begin; t < end; ++t) v += at(t);
          v /= static_cast<double>(end - begin);
          break;
        case PoolMode::kMax:
          v = at(begin);
          for (int64_t t = begin + 1; t < end; ++t) v = std::max(v, at(t));
          break;
        case PoolMode::kMeanSqrtLen:
          for (int64_t t = begin; t < end; ++t) v += at(t);
          v /= std::sqrt(static_cast<double>(end - begin));
          break;
        case PoolMode::kWeightedMean: {
          double weights = 0;
          for (int64_t t = begin; t < end; ++t) {
            v += at(t) * static_cast<double>(t - origin + 1);
            weights += static_cast<double>(t - origin + 1);
          }
          v /= weights;
          break;
        }
      }
      ref.push_back(v);
    }
  }
  return MaxRelError(ReadRows(out_bytes, DType::kF32, num_rows, hidden, hidden), ref);
}

absl::StatusOr<double> CheckLogitDifference(Gpu& gpu, int64_t hidden, uint64_t seed) {
  Rng rng(seed);
  const std::vector<float> pooled = RandomFloats(kRows * hidden, rng, -1, 1, false);
  const std::vector<float> yes = RandomFloats(hidden, rng, -1, 1, false);
  const std::vector<float> no = RandomFloats(hidden, rng, -1, 1, false);
  const cudaStream_t s = gpu.s();
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_pooled, ToDevice(pooled, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_yes, ToDevice(yes, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_no, ToDevice(no, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_scores, PoisonedBuffer(kRows * 4, s));
  QUIVER_RETURN_IF_ERROR(
      Launch(cu::LogitDifference(d_pooled.as<float>(), kRows, hidden, d_yes.as<float>(),
                                 d_no.as<float>(), d_scores.as<float>(), s),
             "LogitDifference"));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> out_bytes, ToHost(d_scores, s));
  std::vector<double> ref;
  for (int64_t r = 0; r < kRows; ++r) {
    double score = 0.0;
    for (int64_t j = 0; j < hidden; ++j) {
      score += static_cast<double>(pooled[r * hidden + j]) * yes[j] -
               static_cast<double>(pooled[r * hidden + j]) * no[j];
    }
    ref.push_back(score);
  }
  return MaxRelError(ReadRows(out_bytes, DType::kF32, 1, kRows, 0), ref);
}

uint32_t FloatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

// F32ToBf16 against the host's round-to-nearest-even FloatToBf16, bit for bit, on random values
// and the edge cases (signed zeros, infinities, ties to even both ways, a subnormal, near the
// bf16 maximum): the number of elements that differ. Also Bf16ToF32 on random non-NaN bit
// patterns (exact widening).
absl::StatusOr<double> CheckF32ToBf16(Gpu& gpu, int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> in = RandomFloats(static_cast<size_t>(n), rng, -1000, 1000, false);
  constexpr float kInfF = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f,        -0.0f,        kInfF,   -kInfF,  1.00390625f,
                            1.01171875f, -1.00390625f, 1e-40f,  -3e-39f, 3.3e38f,
                            -3.3e38f,    1.0f,         65504.0f};
  for (size_t i = 0; i < std::size(specials) && i < in.size(); ++i) in[i * 3] = specials[i];
  const cudaStream_t s = gpu.s();
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_in, ToDevice(in, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_out, PoisonedBuffer(in.size() * 2, s));
  QUIVER_RETURN_IF_ERROR(Launch(cu::F32ToBf16(d_in.as<float>(), d_out.data(), n, s), "F32ToBf16"));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> out, ToHost(d_out, s));
  int64_t wrong = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    uint16_t got;
    std::memcpy(&got, out.data() + 2 * i, 2);
    wrong += got != FloatToBf16(in[i]);
  }
  return static_cast<double>(wrong);
}

absl::StatusOr<double> CheckBf16ToF32(Gpu& gpu, int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint16_t> in(static_cast<size_t>(n));
  for (uint16_t& b : in) {
    do {
      b = static_cast<uint16_t>(rng.Next());
    } while ((b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0);  // no NaN: its payload may vary
  }
  const cudaStream_t s = gpu.s();
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_in, ToDevice(in, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_out, PoisonedBuffer(in.size() * 4, s));
  QUIVER_RETURN_IF_ERROR(Launch(cu::Bf16ToF32(d_in.data(), d_out.as<float>(), n, s), "Bf16ToF32"));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> out, ToHost(d_out, s));
  int64_t wrong = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    uint32_t got;
    std::memcpy(&got, out.data() + 4 * i, 4);
    wrong += got != FloatBits(Bf16ToFloat(in[i]));
  }
  return static_cast<double>(wrong);
}

// CopyRows between strided matrices: the elements whose bits differ from the expected ones
// (exact for a widening or same-type copy, round to nearest even into bf16).
absl::StatusOr<double> CheckCopyRows(Gpu& gpu, DType in_dtype, DType out_dtype, int64_t n,
                                     uint64_t seed) {
  Rng rng(seed);
  const int64_t in_stride = n + 3, out_stride = n + 5;
  const std::vector<float> in = RandomFloats(kRows * in_stride, rng, -50, 50, IsBf16(in_dtype));
  const cudaStream_t s = gpu.s();
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_in, ToDeviceAs(in, in_dtype, s));
  QUIVER_ASSIGN_OR_RETURN(
      cu::DeviceBuffer d_out,
      PoisonedBuffer(static_cast<size_t>(kRows * out_stride) * ElementBytes(out_dtype), s));
  QUIVER_RETURN_IF_ERROR(Launch(cu::CopyRows(d_in.data(), in_stride, in_dtype, d_out.data(),
                                             out_stride, out_dtype, kRows, n, s),
                                "CopyRows"));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> out, ToHost(d_out, s));
  int64_t wrong = 0;
  for (int64_t t = 0; t < kRows; ++t) {
    for (int64_t j = 0; j < n; ++j) {
      const float want = IsBf16(out_dtype) ? Bf16ToFloat(FloatToBf16(in[t * in_stride + j]))
                                           : in[t * in_stride + j];
      const float got = DecodeAt(out, out_dtype, static_cast<size_t>(t * out_stride + j));
      wrong += FloatBits(got) != FloatBits(want);
    }
  }
  return static_cast<double>(wrong);
}

// Every launcher with zero rows succeeds and writes nothing: the bytes of a canary buffer that
// changed.
absl::StatusOr<double> CheckZeroRows(Gpu& gpu, DType act) {
  constexpr size_t kBytes = 1 << 16;
  constexpr int64_t kHidden = 64;
  const cudaStream_t s = gpu.s();
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer canary, cu::DeviceBuffer::Allocate(kBytes));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(canary.data(), 0x11, kBytes, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer zeros, cu::DeviceBuffer::Allocate(kBytes));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(zeros.data(), 0, kBytes, s));
  void* out = canary.data();
  auto* out_f32 = canary.as<float>();
  const void* in = zeros.data();
  const auto* in_f32 = zeros.as<float>();
  const auto* ids = zeros.as<int32_t>();

  cu::EmbeddingArgs embedding;
  embedding.ids = ids;
  embedding.word = in;
  embedding.table_dtype = act;
  embedding.norm = cu::NormKind::kRmsNorm;
  embedding.gamma = in_f32;
  embedding.hidden = kHidden;
  embedding.sum_f32 = out_f32;
  embedding.normed = out;
  embedding.act = act;
  QUIVER_RETURN_IF_ERROR(Launch(cu::Embedding(embedding, s), "Embedding(0 rows)"));
  cu::AddNormArgs add_norm;
  add_norm.residual = out_f32;
  add_norm.add = in;
  add_norm.add_stride = kHidden;
  add_norm.gamma = in_f32;
  add_norm.normed = out;
  add_norm.normed_stride = kHidden;
  add_norm.hidden = kHidden;
  add_norm.act = act;
  QUIVER_RETURN_IF_ERROR(Launch(cu::AddNorm(add_norm, s), "AddNorm(0 rows)"));
  QUIVER_RETURN_IF_ERROR(Launch(cu::Norm(in, kHidden, cu::NormKind::kLayerNorm, in_f32, in_f32,
                                         1e-5f, out, kHidden, 0, kHidden, act, s),
                                "Norm(0 rows)"));
  cu::HeadNormRotaryArgs rotary;
  rotary.x = out;
  rotary.x_stride = kHidden;
  rotary.heads = 1;
  rotary.head_dim = kHidden;
  rotary.gamma = in_f32;
  rotary.positions = ids;
  rotary.act = act;
  QUIVER_RETURN_IF_ERROR(Launch(cu::HeadNormRotary(rotary, s), "HeadNormRotary(0 rows)"));
  QUIVER_RETURN_IF_ERROR(
      Launch(cu::SiluMul(in, 2 * kHidden, out, kHidden, 0, kHidden, act, s), "SiluMul(0 rows)"));
  QUIVER_RETURN_IF_ERROR(
      Launch(cu::BiasActivation(out, kHidden, in_f32, cu::Activation::kGeluErf, 0, kHidden, act, s),
             "BiasActivation(0 rows)"));
  QUIVER_RETURN_IF_ERROR(Launch(
      cu::Pool(in, kHidden, ids, 2, 0, kHidden, PoolMode::kMean, act, out_f32, s), "Pool(0 rows)"));
  QUIVER_RETURN_IF_ERROR(Launch(cu::LogitDifference(in_f32, 0, kHidden, in_f32, in_f32, out_f32, s),
                                "LogitDifference(0 rows)"));
  QUIVER_RETURN_IF_ERROR(
      Launch(cu::CopyRows(in, kHidden, act, out, kHidden, act, 0, kHidden, s), "CopyRows(0 rows)"));
  QUIVER_RETURN_IF_ERROR(Launch(cu::F32ToBf16(in_f32, out, 0, s), "F32ToBf16(0)"));
  QUIVER_RETURN_IF_ERROR(Launch(cu::Bf16ToF32(in, out_f32, 0, s), "Bf16ToF32(0)"));
  QUIVER_RETURN_IF_ERROR(Launch(cu::ReferenceGemm(in, kHidden, act, in, kHidden, act, nullptr,
                                                  out_f32, kHidden, 0, kHidden, kHidden, s),
                                "ReferenceGemm(0 rows)"));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> after, ToHost(canary, s));
  return static_cast<double>(
      std::count_if(after.begin(), after.end(), [](uint8_t b) { return b != 0x11; }));
}

const char* EpilogueName(cu::GemmEpilogue epilogue) {
  switch (epilogue) {
    case cu::GemmEpilogue::kNone:
      return "none";
    case cu::GemmEpilogue::kBias:
      return "bias";
    case cu::GemmEpilogue::kBiasGeluTanh:
      return "bias_gelu_tanh";
  }
  return "?";
}

// The odd GEMM shape of the kernel checks (M not a tile multiple, K not a multiple of 16).
constexpr int64_t kGemmM = 67, kGemmN = 96, kGemmK = 40;

// BlasLt::Gemm y = epilogue(x · wᵀ + bias) (+ c) against a host f64 product of the same bf16
// values; strided x and y.
absl::StatusOr<double> CheckBlasLtGemm(Gpu& gpu, cu::GemmEpilogue epilogue, bool y_f32, bool with_c,
                                       uint64_t seed) {
  Rng rng(seed);
  const int64_t m = kGemmM, n = kGemmN, k = kGemmK;
  const int64_t ldx = k + 8, ldw = k, ldy = n + 8;
  const DType y_dtype = y_f32 ? DType::kF32 : DType::kBF16;
  const std::vector<float> x = RandomFloats(m * ldx, rng, -1, 1, true);
  const std::vector<float> w = RandomFloats(n * ldw, rng, -1, 1, true);
  const std::vector<float> bias = RandomFloats(n, rng, -1, 1, !y_f32);
  const std::vector<float> c = RandomFloats(m * ldy, rng, -1, 1, !y_f32);
  const cudaStream_t s = gpu.s();
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_x, ToDeviceAs(x, DType::kBF16, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_w, ToDeviceAs(w, DType::kBF16, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_bias, ToDeviceAs(bias, y_dtype, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_c, ToDeviceAs(c, y_dtype, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_y,
                          PoisonedBuffer(static_cast<size_t>(m * ldy) * ElementBytes(y_dtype), s));
  const bool has_bias = epilogue != cu::GemmEpilogue::kNone;
  cu::GemmArgs args;
  args.x = d_x.data();
  args.w = d_w.data();
  args.bias = has_bias ? d_bias.data() : nullptr;
  args.c = with_c ? d_c.data() : nullptr;
  args.y = d_y.data();
  args.y_f32 = y_f32;
  args.m = m;
  args.n = n;
  args.k = k;
  args.ldx = ldx;
  args.ldw = ldw;
  args.ldy = ldy;
  args.epilogue = epilogue;
  QUIVER_RETURN_IF_ERROR(gpu.blaslt->Gemm(args, s));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> y_bytes, ToHost(d_y, s));
  std::vector<double> ref;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t col = 0; col < n; ++col) {
      double v = 0.0;
      for (int64_t i = 0; i < k; ++i) v += static_cast<double>(x[r * ldx + i]) * w[col * ldw + i];
      if (has_bias) v += bias[col];
      if (epilogue == cu::GemmEpilogue::kBiasGeluTanh) v = GeluTanh(v);
      if (with_c) v += c[r * ldy + col];
      ref.push_back(v);
    }
  }
  return MaxRelError(ReadRows(y_bytes, y_dtype, m, n, ldy), ref);
}

// ReferenceGemm (the on-GPU reference the engine's GEMM tests use) against the host.
absl::StatusOr<double> CheckReferenceGemm(Gpu& gpu, DType x_dtype, DType w_dtype, bool with_bias,
                                          uint64_t seed) {
  Rng rng(seed);
  const int64_t m = kGemmM, n = kGemmN, k = kGemmK;
  const int64_t ldx = k + 3, ldw = k + 1, ldy = n + 2;
  const std::vector<float> x = RandomFloats(m * ldx, rng, -1, 1, IsBf16(x_dtype));
  const std::vector<float> w = RandomFloats(n * ldw, rng, -1, 1, IsBf16(w_dtype));
  const std::vector<float> bias = RandomFloats(n, rng, -1, 1, false);
  const cudaStream_t s = gpu.s();
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_x, ToDeviceAs(x, x_dtype, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_w, ToDeviceAs(w, w_dtype, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_bias, ToDevice(bias, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_y,
                          PoisonedBuffer(static_cast<size_t>(m * ldy) * 4, s));
  QUIVER_RETURN_IF_ERROR(Launch(
      cu::ReferenceGemm(d_x.data(), ldx, x_dtype, d_w.data(), ldw, w_dtype,
                        with_bias ? d_bias.as<float>() : nullptr, d_y.as<float>(), ldy, m, n, k, s),
      "ReferenceGemm"));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> y_bytes, ToHost(d_y, s));
  std::vector<double> ref;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t col = 0; col < n; ++col) {
      double v = 0.0;
      for (int64_t i = 0; i < k; ++i) v += static_cast<double>(x[r * ldx + i]) * w[col * ldw + i];
      if (with_bias) v += bias[col];
      ref.push_back(v);
    }
  }
  return MaxRelError(ReadRows(y_bytes, DType::kF32, m, n, ldy), ref);
}

void RunKernels(Report& report, Gpu& gpu, const Options& options) {
  (void)options;  // the kernel checks are small already; --quick runs them all
  uint64_t seed = 1000;
  const DType acts[] = {DType::kF32, DType::kBF16};
  const int64_t hiddens[] = {37, 1024};
  for (const DType act : acts) {
    const std::string a = ActName(act);
    const double tol = Tolerance(act);
    for (const int64_t h : hiddens) {
      const std::string suffix = absl::StrCat("_", a, "_h", h);
      for (const cu::NormKind norm :
           {cu::NormKind::kNone, cu::NormKind::kLayerNorm, cu::NormKind::kRmsNorm}) {
        report.Expect(absl::StrCat("embedding_", NormName(norm), suffix),
                      CheckEmbedding(gpu, act, act, h, norm, ++seed), tol);
        report.Expect(absl::StrCat("add_norm_", NormName(norm), suffix),
                      CheckAddNorm(gpu, act, h, norm, /*post_ln=*/false, ++seed), tol);
      }
      if (act == DType::kF32) {  // bf16 tables, f32 activations
        report.Expect(absl::StrCat("embedding_layernorm_table_bf16", suffix),
                      CheckEmbedding(gpu, act, DType::kBF16, h, cu::NormKind::kLayerNorm, ++seed),
                      tol);
      }
      report.Expect(absl::StrCat("add_norm_layernorm_post_ln", suffix),
                    CheckAddNorm(gpu, act, h, cu::NormKind::kLayerNorm, /*post_ln=*/true, ++seed),
                    tol);
      for (const cu::NormKind norm : {cu::NormKind::kLayerNorm, cu::NormKind::kRmsNorm}) {
        for (const bool in_place : {false, true}) {
          report.Expect(absl::StrCat("norm_", NormName(norm), in_place ? "_in_place" : "", suffix),
                        CheckNorm(gpu, act, h, norm, in_place, ++seed), tol);
        }
      }
      report.Expect(absl::StrCat("silu_mul", suffix), CheckSiluMul(gpu, act, h, ++seed), tol);
      for (const cu::Activation activation :
           {cu::Activation::kIdentity, cu::Activation::kGeluErf, cu::Activation::kGeluTanh,
            cu::Activation::kTanh, cu::Activation::kRelu}) {
        report.Expect(absl::StrCat("bias_activation_", ActivationName(activation), suffix),
                      CheckBiasActivation(gpu, act, h, activation, true, ++seed), tol);
      }
      report.Expect(absl::StrCat("bias_activation_gelu_erf_no_bias", suffix),
                    CheckBiasActivation(gpu, act, h, cu::Activation::kGeluErf, false, ++seed), tol);
      for (const PoolMode mode :
           {PoolMode::kCls, PoolMode::kMean, PoolMode::kLastToken, PoolMode::kMax,
            PoolMode::kMeanSqrtLen, PoolMode::kWeightedMean}) {
        report.Expect(absl::StrCat("pool_", PoolName(mode), suffix),
                      CheckPool(gpu, act, h, mode, ++seed), tol);
      }
    }
    for (const int64_t head_dim : {64, 128}) {
      for (const RotaryLayout layout : {RotaryLayout::kNeox, RotaryLayout::kGptJ}) {
        for (const bool aligned : {true, false}) {
          report.Expect(
              absl::StrCat("head_norm_rotary_d", head_dim,
                           layout == RotaryLayout::kNeox ? "_neox" : "_gptj",
                           aligned ? "" : "_unaligned", "_", a),
              CheckHeadNormRotary(gpu, act, head_dim, layout, aligned, true, true, ++seed), tol);
        }
      }
    }
    report.Expect(
        absl::StrCat("head_norm_only_d128_", a),
        CheckHeadNormRotary(gpu, act, 128, RotaryLayout::kNeox, true, true, false, ++seed), tol);
    report.Expect(
        absl::StrCat("head_rotary_only_d128_", a),
        CheckHeadNormRotary(gpu, act, 128, RotaryLayout::kNeox, true, false, true, ++seed), tol);
    report.Expect(absl::StrCat("zero_rows_changed_bytes_", a), CheckZeroRows(gpu, act), 0.0);
  }
  for (const int64_t h : hiddens) {
    report.Expect(absl::StrCat("logit_difference_h", h), CheckLogitDifference(gpu, h, ++seed),
                  Tolerance(DType::kF32));
    for (const DType in : acts) {
      for (const DType out : acts) {
        report.Expect(absl::StrCat("copy_rows_", ActName(in), "_to_", ActName(out), "_h", h,
                                   "_wrong_elements"),
                      CheckCopyRows(gpu, in, out, h, ++seed), 0.0);
      }
    }
  }
  report.Expect("f32_to_bf16_wrong_elements", CheckF32ToBf16(gpu, kRows * 1024 + 5, ++seed), 0.0);
  report.Expect("bf16_to_f32_wrong_elements", CheckBf16ToF32(gpu, kRows * 1024 + 5, ++seed), 0.0);

  for (const bool y_f32 : {false, true}) {
    const char* y = y_f32 ? "y_f32" : "y_bf16";
    for (const cu::GemmEpilogue epilogue :
         {cu::GemmEpilogue::kNone, cu::GemmEpilogue::kBias, cu::GemmEpilogue::kBiasGeluTanh}) {
      report.Expect(absl::StrCat("blaslt_gemm_", EpilogueName(epilogue), "_", y, "_m67n96k40"),
                    CheckBlasLtGemm(gpu, epilogue, y_f32, /*with_c=*/false, ++seed), 2e-2);
    }
    report.Expect(absl::StrCat("blaslt_gemm_bias_residual_", y, "_m67n96k40"),
                  CheckBlasLtGemm(gpu, cu::GemmEpilogue::kBias, y_f32, /*with_c=*/true, ++seed),
                  2e-2);
  }
  for (const DType x_dtype : acts) {
    for (const DType w_dtype : acts) {
      report.Expect(absl::StrCat("reference_gemm_x", ActName(x_dtype), "_w", ActName(w_dtype),
                                 "_bias_m67n96k40"),
                    CheckReferenceGemm(gpu, x_dtype, w_dtype, true, ++seed), 1e-4);
    }
  }
  report.Expect("reference_gemm_xbf16_wbf16_no_bias_m67n96k40",
                CheckReferenceGemm(gpu, DType::kBF16, DType::kBF16, false, ++seed), 1e-4);
}

// ---------------------------------------------------------------------------------------------
// Stage 3: attention.

// STAGE_ATTENTION
enum class Backend { kVarlen, kFa2, kFa3 };
constexpr Backend kBackends[] = {Backend::kVarlen, Backend::kFa2, Backend::kFa3};

std::string BackendName(Backend backend) {
  switch (backend) {
    case Backend::kVarlen:
      return "varlen";
    case Backend::kFa2:
      return std::string(cu::FlashInferKernelName(cu::FlashInferKernel::kFa2));
    case Backend::kFa3:
      return std::string(cu::FlashInferKernelName(cu::FlashInferKernel::kFa3));
  }
  return "?";
}
cu::FlashInferKernel KernelOf(Backend backend) {
  return backend == Backend::kFa3 ? cu::FlashInferKernel::kFa3 : cu::FlashInferKernel::kFa2;
}
// Whether this build has the backend at head_dim (the brief's sets: FA3 64 / 128 only).
bool BackendBuilt(Backend backend, int head_dim) {
  switch (backend) {
    case Backend::kVarlen:
      return cu::VarlenFlashAttentionSupports(head_dim);
    case Backend::kFa2:
      return cu::FlashInferSupports(cu::FlashInferKernel::kFa2, head_dim);
    case Backend::kFa3:
      return head_dim != 32 && cu::FlashInferSupports(cu::FlashInferKernel::kFa3, head_dim);
  }
  return false;
}

// Views into one fused bf16 qkv [num_tokens, (num_heads + 2 · num_kv_heads) · head_dim]: q, then
// k, then v, each row strided by the fused row; out dense [num_tokens, num_heads · head_dim].
cu::RaggedAttentionArgs FusedArgs(const void* qkv, int num_heads, int num_kv_heads, int head_dim,
                                  void* out, DType out_dtype, const int32_t* device_cu_seqlens,
                                  int64_t num_seqs, int64_t num_tokens, int64_t max_seqlen,
                                  bool causal) {
  const auto* base = static_cast<const uint16_t*>(qkv);
  const int64_t row = int64_t{num_heads + 2 * num_kv_heads} * head_dim;
  cu::RaggedAttentionArgs args;
  args.q = base;
  args.k = base + int64_t{num_heads} * head_dim;
  args.v = base + int64_t{num_heads + num_kv_heads} * head_dim;
  args.out = out;
  args.q_stride = row;
  args.kv_stride = row;
  args.out_stride = int64_t{num_heads} * head_dim;
  args.dtype = DType::kBF16;
  args.out_dtype = out_dtype;
  args.cu_seqlens = device_cu_seqlens;
  args.num_seqs = num_seqs;
  args.num_tokens = num_tokens;
  args.max_seqlen = max_seqlen;
  args.num_heads = num_heads;
  args.num_kv_heads = num_kv_heads;
  args.head_dim = head_dim;
  args.causal = causal;
  args.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  return args;
}

// One backend instance: FlashInfer's needs creating (and planning per batch); varlen needs
// nothing. FAILED_PRECONDITION from Create means "not on this device" (FA3 off Hopper).
struct AttentionBackend {
  Backend backend = Backend::kVarlen;
  std::unique_ptr<cu::FlashInferPrefill> flashinfer;
  int next_slot = 0;

  static absl::StatusOr<AttentionBackend> Make(Backend backend, int head_dim, int num_heads,
                                               int num_kv_heads, int64_t max_tokens,
                                               int64_t max_seqs) {
    AttentionBackend made;
    made.backend = backend;
    if (backend == Backend::kVarlen) return made;
    cu::FlashInferConfig config;
    config.kernel = KernelOf(backend);
    config.head_dim = head_dim;
    config.num_heads = num_heads;
    config.num_kv_heads = num_kv_heads;
    config.max_tokens = max_tokens;
    config.max_seqs = max_seqs;
    config.num_slots = 2;
    config.cuda_graph = false;
    QUIVER_ASSIGN_OR_RETURN(made.flashinfer, cu::FlashInferPrefill::Create(config));
    return made;
  }
  // Host-side planning (FlashInfer only); outside any timed region.
  absl::Status Plan(const std::vector<int32_t>& host_cu_seqlens, bool causal, cudaStream_t stream) {
    if (flashinfer == nullptr) return absl::OkStatus();
    const int slot = next_slot;
    next_slot = (next_slot + 1) % 2;
    return flashinfer->Plan(slot, host_cu_seqlens.data(),
                            static_cast<int64_t>(host_cu_seqlens.size()) - 1, causal, stream);
  }
  absl::Status Run(const cu::RaggedAttentionArgs& args, cudaStream_t stream) {
    if (flashinfer == nullptr) {
      return Launch(cu::VarlenFlashAttention(args, stream), "VarlenFlashAttention");
    }
    return flashinfer->Run(args, stream);
  }
};

// max |out - ref| / max(1e-6, max |ref|); infinity on any NaN / infinity.
double AttentionError(std::span<const float> out, std::span<const float> ref) {
  if (out.size() != ref.size()) return kInf;
  double max_ref = 0.0, max_diff = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i]) || !std::isfinite(ref[i])) return kInf;
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(out[i]) - ref[i]));
  }
  return max_diff / std::max(1e-6, max_ref);
}

std::vector<int32_t> CuSeqlens(std::span<const int64_t> lengths) {
  std::vector<int32_t> cu_seqlens = {0};
  for (int64_t length : lengths)
    cu_seqlens.push_back(cu_seqlens.back() + static_cast<int32_t>(length));
  return cu_seqlens;
}

// The correctness checks of every built backend on one (head_dim, heads, causal) problem against
// ReferenceAttention. `passed[backend]` is cleared by a failure and where this device cannot run
// the backend (then named in `skipped`).
void CheckAttentionCase(Report& report, Gpu& gpu, int head_dim, int num_heads, int num_kv_heads,
                        bool causal, uint64_t seed, bool (&passed)[3],
                        std::vector<std::string>& skipped) {
  const std::vector<int64_t> lengths = {1, 17, 0, 130, 64};
  const std::vector<int32_t> cu_seqlens = CuSeqlens(lengths);
  const int64_t num_seqs = static_cast<int64_t>(lengths.size());
  const int64_t num_tokens = cu_seqlens.back();
  const int64_t max_seqlen = *std::max_element(lengths.begin(), lengths.end());
  const int64_t row = int64_t{num_heads + 2 * num_kv_heads} * head_dim;
  const int64_t out_row = int64_t{num_heads} * head_dim;
  const std::string shape = absl::StrCat("_d", head_dim, "_h", num_heads, "kv", num_kv_heads,
                                         causal ? "_causal" : "_bidir");
  const cudaStream_t s = gpu.s();

  const std::vector<uint16_t> qkv = RandomBf16(static_cast<size_t>(num_tokens * row), seed, 2.0f);
  absl::StatusOr<cu::DeviceBuffer> d_qkv = ToDevice(qkv, s);
  absl::StatusOr<cu::DeviceBuffer> d_cu = ToDevice(cu_seqlens, s);
  absl::StatusOr<cu::DeviceBuffer> d_ref =
      PoisonedBuffer(static_cast<size_t>(num_tokens * out_row) * 4, s);
  absl::StatusOr<cu::DeviceBuffer> d_out =
      PoisonedBuffer(static_cast<size_t>(num_tokens * out_row) * 2, s);
  for (const absl::Status& status :
       {d_qkv.status(), d_cu.status(), d_ref.status(), d_out.status()}) {
    if (!status.ok()) {
      report.Error(absl::StrCat("attention_setup", shape), status);
      for (bool& p : passed) p = false;
      return;
    }
  }
  const absl::StatusOr<std::vector<float>> ref = [&]() -> absl::StatusOr<std::vector<float>> {
    const cu::RaggedAttentionArgs args =
        FusedArgs(d_qkv->data(), num_heads, num_kv_heads, head_dim, d_ref->data(), DType::kF32,
                  d_cu->as<int32_t>(), num_seqs, num_tokens, max_seqlen, causal);
    QUIVER_RETURN_IF_ERROR(Launch(cu::ReferenceAttention(args, s), "ReferenceAttention"));
    QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ToHost(*d_ref, s));
    return ReadRows(bytes, DType::kF32, 1, num_tokens * out_row, 0);
  }();
  if (!ref.ok()) {
    report.Error(absl::StrCat("attention_reference", shape), ref.status());
    for (bool& p : passed) p = false;
    return;
  }
  for (const Backend backend : kBackends) {
    if (!BackendBuilt(backend, head_dim)) continue;
    const std::string name = absl::StrCat("attention_", BackendName(backend), shape);
    absl::StatusOr<AttentionBackend> instance =
        AttentionBackend::Make(backend, head_dim, num_heads, num_kv_heads, num_tokens, num_seqs);
    if (!instance.ok() && absl::IsFailedPrecondition(instance.status())) {
      skipped.push_back(absl::StrCat(name, ": ", instance.status().message()));
      passed[static_cast<int>(backend)] = false;  // not timed either
      std::printf("  [SKIP] %s: %s\n", name.c_str(), instance.status().ToString().c_str());
      continue;
    }
    absl::StatusOr<double> error = [&]() -> absl::StatusOr<double> {
      QUIVER_RETURN_IF_ERROR(instance.status());
      QUIVER_RETURN_IF_ERROR(Poison(*d_out, s));
      QUIVER_RETURN_IF_ERROR(instance->Plan(cu_seqlens, causal, s));
      const cu::RaggedAttentionArgs args =
          FusedArgs(d_qkv->data(), num_heads, num_kv_heads, head_dim, d_out->data(), DType::kBF16,
                    d_cu->as<int32_t>(), num_seqs, num_tokens, max_seqlen, causal);
      QUIVER_RETURN_IF_ERROR(instance->Run(args, s));
      QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ToHost(*d_out, s));
      return AttentionError(ReadRows(bytes, DType::kBF16, 1, num_tokens * out_row, 0), *ref);
    }();
    report.Expect(name, error, 2e-2);
    if (!error.ok() || !(*error <= 2e-2)) passed[static_cast<int>(backend)] = false;
  }
}

// Sliding windows and relative position biases (MPNet, T5, ModernBERT, Gemma 3): the reference
// kernel against the definition computed here in double from the same bf16 inputs, and the
// varlen kernel against the reference kernel. head_dim 64, 4 query heads over 2 kv heads.
absl::StatusOr<double> CheckMaskedAttentionCase(Gpu& gpu, bool causal, int64_t window,
                                                int64_t bias_distance, uint64_t seed,
                                                double& varlen_error) {
  constexpr int kHeads = 4, kKvHeads = 2, kDim = 64;
  const std::vector<int64_t> lengths = {1, 17, 130, 300};
  const std::vector<int32_t> cu_seqlens = CuSeqlens(lengths);
  const int64_t num_seqs = static_cast<int64_t>(lengths.size()), num_tokens = cu_seqlens.back();
  const int64_t row = int64_t{kHeads + 2 * kKvHeads} * kDim, out_row = int64_t{kHeads} * kDim;
  const cudaStream_t s = gpu.s();
  const std::vector<uint16_t> qkv = RandomBf16(static_cast<size_t>(num_tokens * row), seed, 2.0f);
  std::vector<float> bias;
  if (bias_distance > 0) {
    const std::vector<uint16_t> bits = RandomBf16(kHeads * (2 * bias_distance + 1), seed + 1, 2.0f);
    for (uint16_t b : bits) bias.push_back(Bf16ToFloat(b));
  }
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_qkv, ToDevice(qkv, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_cu, ToDevice(cu_seqlens, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_bias,
                          ToDevice(bias.empty() ? std::vector<float>{0.0f} : bias, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_ref,
                          PoisonedBuffer(static_cast<size_t>(num_tokens * out_row) * 4, s));
  QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_out,
                          PoisonedBuffer(static_cast<size_t>(num_tokens * out_row) * 2, s));
  const int64_t max_seqlen = *std::max_element(lengths.begin(), lengths.end());
  auto args_for = [&](void* out, DType out_dtype) {
    cu::RaggedAttentionArgs args =
        FusedArgs(d_qkv.data(), kHeads, kKvHeads, kDim, out, out_dtype, d_cu.as<int32_t>(),
                  num_seqs, num_tokens, max_seqlen, causal);
    args.window = window;
    args.position_bias = bias_distance > 0 ? d_bias.as<float>() : nullptr;
    args.bias_max_distance = bias_distance;
    return args;
  };
  QUIVER_RETURN_IF_ERROR(
      Launch(cu::ReferenceAttention(args_for(d_ref.data(), DType::kF32), s), "ReferenceAttention"));
  QUIVER_RETURN_IF_ERROR(Launch(cu::VarlenFlashAttention(args_for(d_out.data(), DType::kBF16), s),
                                "VarlenFlashAttention"));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> ref_bytes, ToHost(d_ref, s));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> out_bytes, ToHost(d_out, s));
  const std::vector<float> ref = ReadRows(ref_bytes, DType::kF32, 1, num_tokens * out_row, 0);
  const std::vector<float> out = ReadRows(out_bytes, DType::kBF16, 1, num_tokens * out_row, 0);
  varlen_error = AttentionError(out, ref);
  // The definition, in double.
  auto at = [&](int64_t token, int64_t column) {
    return static_cast<double>(Bf16ToFloat(qkv[static_cast<size_t>(token * row + column)]));
  };
  std::vector<float> want(static_cast<size_t>(num_tokens * out_row));
  const double scale = 1.0 / std::sqrt(static_cast<double>(kDim));
  for (int64_t sq = 0; sq < num_seqs; ++sq) {
    const int64_t begin = cu_seqlens[sq], len = lengths[static_cast<size_t>(sq)];
    for (int64_t h = 0; h < kHeads; ++h) {
      const int64_t kvh = h / (kHeads / kKvHeads);
      for (int64_t i = 0; i < len; ++i) {
        std::vector<double> p(static_cast<size_t>(len), 0.0);
        std::vector<bool> seen(static_cast<size_t>(len), false);
        double best = -1e300, sum = 0;
        for (int64_t j = 0; j < len; ++j) {
          if ((causal && j > i) || (window >= 0 && std::abs(i - j) > window)) continue;
          double dot = 0;
          for (int64_t d = 0; d < kDim; ++d) {
            dot += at(begin + i, h * kDim + d) * at(begin + j, (kHeads + kvh) * kDim + d);
          }
          dot *= scale;
          if (bias_distance > 0) {
            const int64_t dist = std::clamp<int64_t>(j - i, -bias_distance, bias_distance);
            dot += bias[static_cast<size_t>(h * (2 * bias_distance + 1) + dist + bias_distance)];
          }
          p[static_cast<size_t>(j)] = dot;
          seen[static_cast<size_t>(j)] = true;
          best = std::max(best, dot);
        }
        for (int64_t j = 0; j < len; ++j) {
          p[static_cast<size_t>(j)] =
              seen[static_cast<size_t>(j)] ? std::exp(p[static_cast<size_t>(j)] - best) : 0.0;
          sum += p[static_cast<size_t>(j)];
        }
        for (int64_t d = 0; d < kDim; ++d) {
          double o = 0;
          for (int64_t j = 0; j < len; ++j) {
            o += p[static_cast<size_t>(j)] * at(begin + j, (kHeads + kKvHeads + kvh) * kDim + d);
          }
          want[static_cast<size_t>((begin + i) * out_row + h * kDim + d)] =
              static_cast<float>(o / sum);
        }
      }
    }
  }
  return AttentionError(ref, want);
}

void CheckMaskedAttention(Report& report, Gpu& gpu) {
  struct Case {
    const char* name;
    bool causal;
    int64_t window, bias_distance;
  };
  const Case cases[] = {{"window40_bidir", false, 40, 0},
                        {"window40_causal", true, 40, 0},
                        {"bias128_bidir", false, -1, 128},
                        {"bias8_window100_bidir", false, 100, 8}};
  uint64_t seed = 7000;
  for (const Case& c : cases) {
    double varlen = kInf;
    const absl::StatusOr<double> ref =
        CheckMaskedAttentionCase(gpu, c.causal, c.window, c.bias_distance, ++seed, varlen);
    report.Expect(absl::StrCat("attention_masked_reference_", c.name), ref, 1e-5);
    if (ref.ok()) report.Expect(absl::StrCat("attention_masked_varlen_", c.name), varlen, 2e-2);
  }
}

struct AttentionTiming {
  Backend backend;
  int head_dim;
  bool causal;
  int64_t num_seqs, seqlen;
  double ms, tflops;
};

void RunAttention(Report& report, Gpu& gpu, const Options& options) {
  const cudaStream_t s = gpu.s();
  // Correctness.
  bool passed[3][3];  // [head_dim index: 32, 64, 128][backend]
  for (auto& row : passed) std::fill(std::begin(row), std::end(row), true);
  std::vector<std::string> skipped;
  const int head_dims[] = {32, 64, 128};
  uint64_t seed = 5000;
  for (int di = 0; di < 3; ++di) {
    for (const auto& [heads, kv_heads] : {std::pair{16, 8}, std::pair{8, 8}}) {
      for (const bool causal : {false, true}) {
        CheckAttentionCase(report, gpu, head_dims[di], heads, kv_heads, causal, ++seed, passed[di],
                           skipped);
      }
    }
  }
  CheckMaskedAttention(report, gpu);
  if (options.checkpoint) options.checkpoint();  // the correctness half, should timing be cut off
  // A backend is timed at a head_dim only where it is built, ran and passed there.
  bool timed[3][3];
  for (int di = 0; di < 3; ++di) {
    for (const Backend backend : kBackends) {
      const auto b = static_cast<int>(backend);
      timed[di][b] = BackendBuilt(backend, head_dims[di]) && passed[di][b];
    }
  }

  // Timings: H 16, Hkv 8, every shape num_seqs x seqlen of the same token count.
  const std::optional<double> gemm_tflops =
      ReadGemmCeiling(options.ceilings_path, options.json_path);
  if (gemm_tflops.has_value()) report.Metric("gemm_tflops_ceiling", *gemm_tflops);
  constexpr int kHeads = 16, kKvHeads = 8;
  const std::vector<std::pair<int64_t, int64_t>> shapes =
      options.quick
          ? std::vector<std::pair<int64_t, int64_t>>{{4, 256}, {1, 1024}}
          : std::vector<std::pair<int64_t, int64_t>>{{64, 128}, {16, 512}, {4, 2048}, {1, 8192}};
  const int reps = options.quick ? 3 : 20;
  int64_t max_tokens = 0, max_seqs = 0;
  for (const auto& [n, l] : shapes) {
    max_tokens = std::max(max_tokens, n * l);
    max_seqs = std::max(max_seqs, n);
  }
  std::vector<AttentionTiming> timings;
  absl::Status setup = [&]() -> absl::Status {
    const int64_t row = int64_t{kHeads + 2 * kKvHeads} * 128;  // the largest head_dim's
    const std::vector<uint16_t> qkv = RandomBf16(static_cast<size_t>(max_tokens * row), 77, 2.0f);
    QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_qkv, ToDevice(qkv, s));
    QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_out,
                            PoisonedBuffer(static_cast<size_t>(max_tokens * kHeads * 128) * 2, s));
    for (int di = 0; di < 3; ++di) {
      const int head_dim = head_dims[di];
      for (const Backend backend : kBackends) {
        if (!timed[di][static_cast<int>(backend)]) continue;
        const std::string what = absl::StrCat("time_", BackendName(backend), "_d", head_dim);
        absl::StatusOr<AttentionBackend> instance =
            AttentionBackend::Make(backend, head_dim, kHeads, kKvHeads, max_tokens, max_seqs);
        if (!instance.ok()) {
          report.Error(what, instance.status());
          continue;
        }
        for (const bool causal : {false, true}) {
          for (const auto& [num_seqs, seqlen] : shapes) {
            const std::string name =
                absl::StrCat(what, causal ? "_causal_" : "_bidir_", num_seqs, "x", seqlen);
            absl::StatusOr<double> ms = [&]() -> absl::StatusOr<double> {
              const std::vector<int64_t> lengths(static_cast<size_t>(num_seqs), seqlen);
              const std::vector<int32_t> cu_seqlens = CuSeqlens(lengths);
              QUIVER_ASSIGN_OR_RETURN(cu::DeviceBuffer d_cu, ToDevice(cu_seqlens, s));
              QUIVER_RETURN_IF_ERROR(instance->Plan(cu_seqlens, causal, s));
              const cu::RaggedAttentionArgs args =
                  FusedArgs(d_qkv.data(), kHeads, kKvHeads, head_dim, d_out.data(), DType::kBF16,
                            d_cu.as<int32_t>(), num_seqs, num_seqs * seqlen, seqlen, causal);
              auto run = [&]() { return instance->Run(args, s); };
              for (int i = 0; i < 2; ++i) QUIVER_RETURN_IF_ERROR(run());
              QUIVER_ASSIGN_OR_RETURN(std::vector<float> each, TimeRuns(reps, s, run));
              return Median(each);
            }();
            if (!ms.ok()) {
              report.Error(name, ms.status());
              continue;
            }
            const double flops = 4.0 * static_cast<double>(num_seqs) * static_cast<double>(seqlen) *
                                 static_cast<double>(seqlen) * kHeads * head_dim /
                                 (causal ? 2.0 : 1.0);
            const double tflops = flops / (*ms * 1e-3) / 1e12;
            std::printf("  %-52s %9.4f ms %7.1f TFLOP/s\n", name.c_str(), *ms, tflops);
            timings.push_back({backend, head_dim, causal, num_seqs, seqlen, *ms, tflops});
          }
        }
      }
    }
    return absl::OkStatus();
  }();
  if (!setup.ok()) report.Error("attention_timing_setup", setup);

  JsonWriter w;
  w.BeginArray();
  for (const AttentionTiming& t : timings) {
    w.BeginObject();
    w.Key("backend").String(BackendName(t.backend));
    w.Key("head_dim").Int(t.head_dim);
    w.Key("causal").Bool(t.causal);
    w.Key("num_seqs").Int(t.num_seqs);
    w.Key("seqlen").Int(t.seqlen);
    w.Key("ms").Double(t.ms);
    w.Key("tflops").Double(t.tflops);
    w.Key("frac_of_gemm");
    if (gemm_tflops.has_value()) {
      w.Double(t.tflops / *gemm_tflops);
    } else {
      w.Null();
    }
    w.EndObject();
  }
  w.EndArray();
  report.Section("timings", std::move(w).Take());

  // The fastest backend per (head_dim, causal, shape).
  JsonWriter c;
  c.BeginArray();
  std::printf("  crossover (fastest backend):\n");
  for (const int head_dim : head_dims) {
    for (const bool causal : {false, true}) {
      for (const auto& [num_seqs, seqlen] : shapes) {
        const AttentionTiming* best = nullptr;
        for (const AttentionTiming& t : timings) {
          if (t.head_dim != head_dim || t.causal != causal || t.num_seqs != num_seqs ||
              t.seqlen != seqlen) {
            continue;
          }
          if (best == nullptr || t.ms < best->ms) best = &t;
        }
        if (best == nullptr) continue;
        c.BeginObject();
        c.Key("head_dim").Int(head_dim);
        c.Key("causal").Bool(causal);
        c.Key("shape").String(absl::StrCat(num_seqs, "x", seqlen));
        c.Key("fastest").String(BackendName(best->backend));
        c.Key("ms").Double(best->ms);
        c.Key("ms_by_backend").BeginObject();
        for (const AttentionTiming& t : timings) {
          if (t.head_dim == head_dim && t.causal == causal && t.num_seqs == num_seqs &&
              t.seqlen == seqlen) {
            c.Key(BackendName(t.backend)).Double(t.ms);
          }
        }
        c.EndObject();
        c.EndObject();
        std::printf("    d%-3d %-6s %5lldx%-5lld %-16s %.4f ms\n", head_dim,
                    causal ? "causal" : "bidir", static_cast<long long>(num_seqs),
                    static_cast<long long>(seqlen), BackendName(best->backend).c_str(), best->ms);
      }
    }
  }
  c.EndArray();
  report.Section("crossover", std::move(c).Take());

  JsonWriter sk;
  sk.BeginArray();
  for (const std::string& line : skipped) sk.String(line);
  sk.EndArray();
  report.Section("skipped", std::move(sk).Take());

  // Key numbers, and the goal: FA3 at 1 x 8192, head_dim 128, bidirectional, ≥ 60% of the GEMM
  // ceiling.
  const int64_t long_seqlen = shapes.back().second;
  for (const AttentionTiming& t : timings) {
    if (t.head_dim == 128 && !t.causal && t.num_seqs == 1 && t.seqlen == long_seqlen) {
      report.Metric(absl::StrCat(BackendName(t.backend), "_d128_1x", long_seqlen, "_bidir_tflops"),
                    t.tflops);
    }
  }
  double fa3_frac = kNaN;
  std::string note;
  if (!gemm_tflops.has_value()) note = "no gemm_tflops (pass --ceilings ceilings.json)";
  for (const AttentionTiming& t : timings) {
    if (t.backend == Backend::kFa3 && t.head_dim == 128 && !t.causal && t.num_seqs == 1 &&
        t.seqlen == 8192 && gemm_tflops.has_value()) {
      fa3_frac = t.tflops / *gemm_tflops;
    }
  }
  if (note.empty() && std::isnan(fa3_frac))
    note = "flashinfer_fa3 1x8192 d128 bidirectional not timed";
  if (!std::isnan(fa3_frac)) report.Metric("fa3_d128_1x8192_bidir_frac_of_gemm", fa3_frac);
  report.Expect("goal_fa3_d128_1x8192_bidir_frac_of_gemm", fa3_frac, 0.6, ">=", /*goal=*/true,
                note);
}

// ---------------------------------------------------------------------------------------------
// Stage 4: graphs.

// STAGE_GRAPHS
// The synthetic decoder layer loop: Qwen-like shapes (hidden 1024, 8 query heads and 4 kv heads of
// 128, intermediate 3072), random weights, no embedding or head.
constexpr int64_t kLoopHidden = 1024, kLoopInter = 3072;
constexpr int kLoopHeads = 8, kLoopKvHeads = 4, kLoopHeadDim = 128;
constexpr int64_t kLoopQkv = int64_t{kLoopHeads + 2 * kLoopKvHeads} * kLoopHeadDim;  // 2048

struct LoopLayer {
  cu::DeviceBuffer qkv_w;                  // bf16 [2048, 1024]
  cu::DeviceBuffer o_w;                    // bf16 [1024, 1024]
  cu::DeviceBuffer gate_up_w;              // bf16 [6144, 1024]
  cu::DeviceBuffer down_w;                 // bf16 [1024, 3072]
  cu::DeviceBuffer attn_gamma, mlp_gamma;  // f32 [1024]
};

struct LoopState {
  std::vector<LoopLayer> layers;
  int64_t max_tokens = 0;
  cu::DeviceBuffer x_init;         // bf16 [max_tokens, 1024]: the first layer's normed input
  cu::DeviceBuffer residual_init;  // f32 [max_tokens, 1024]
  cu::DeviceBuffer normed;         // bf16 [max_tokens, 1024]: each layer's input and output
  cu::DeviceBuffer residual;       // f32 [max_tokens, 1024]
  cu::DeviceBuffer qkv;            // bf16 [max_tokens, 2048]
  cu::DeviceBuffer ctx;            // bf16 [max_tokens, 1024]
  cu::DeviceBuffer proj;           // bf16 [max_tokens, 1024]: o_proj and down_proj outputs
  cu::DeviceBuffer gate_up;        // bf16 [max_tokens, 6144]
  cu::DeviceBuffer act;            // bf16 [max_tokens, 3072]
};

absl::StatusOr<LoopState> MakeLoopState(int num_layers, int64_t max_tokens, cudaStream_t s) {
  LoopState state;
  state.max_tokens = max_tokens;
  uint64_t seed = 9000;
  Rng rng(seed);
  for (int l = 0; l < num_layers; ++l) {
    LoopLayer layer;
    QUIVER_ASSIGN_OR_RETURN(layer.qkv_w,
                            ToDevice(RandomBf16(kLoopQkv * kLoopHidden, ++seed, 0.02f), s));
    QUIVER_ASSIGN_OR_RETURN(layer.o_w,
                            ToDevice(RandomBf16(kLoopHidden * kLoopHidden, ++seed, 0.02f), s));
    QUIVER_ASSIGN_OR_RETURN(layer.gate_up_w,
                            ToDevice(RandomBf16(2 * kLoopInter * kLoopHidden, ++seed, 0.02f), s));
    QUIVER_ASSIGN_OR_RETURN(layer.down_w,
                            ToDevice(RandomBf16(kLoopHidden * kLoopInter, ++seed, 0.02f), s));
    QUIVER_ASSIGN_OR_RETURN(layer.attn_gamma,
                            ToDevice(RandomFloats(kLoopHidden, rng, 0.5f, 1.5f, false), s));
    QUIVER_ASSIGN_OR_RETURN(layer.mlp_gamma,
                            ToDevice(RandomFloats(kLoopHidden, rng, 0.5f, 1.5f, false), s));
    state.layers.push_back(std::move(layer));
  }
  const auto rows = static_cast<size_t>(max_tokens);
  QUIVER_ASSIGN_OR_RETURN(state.x_init, ToDevice(RandomBf16(rows * kLoopHidden, ++seed, 1.0f), s));
  QUIVER_ASSIGN_OR_RETURN(state.residual_init,
                          ToDevice(RandomFloats(rows * kLoopHidden, rng, -1, 1, false), s));
  QUIVER_ASSIGN_OR_RETURN(state.normed, PoisonedBuffer(rows * kLoopHidden * 2, s));
  QUIVER_ASSIGN_OR_RETURN(state.residual, PoisonedBuffer(rows * kLoopHidden * 4, s));
  QUIVER_ASSIGN_OR_RETURN(state.qkv, PoisonedBuffer(rows * kLoopQkv * 2, s));
  QUIVER_ASSIGN_OR_RETURN(state.ctx, PoisonedBuffer(rows * kLoopHidden * 2, s));
  QUIVER_ASSIGN_OR_RETURN(state.proj, PoisonedBuffer(rows * kLoopHidden * 2, s));
  QUIVER_ASSIGN_OR_RETURN(state.gate_up, PoisonedBuffer(rows * 2 * kLoopInter * 2, s));
  QUIVER_ASSIGN_OR_RETURN(state.act, PoisonedBuffer(rows * kLoopInter * 2, s));
  return state;
}

// One batch of the loop: m tokens in num_seqs sequences (device cu_seqlens).
struct LoopBatch {
  int64_t m = 0;
  int64_t num_seqs = 0;
  int64_t max_seqlen = 0;
  const int32_t* device_cu_seqlens = nullptr;
};

// The inputs back to their initial values (outside any captured region).
absl::Status ResetLoopInputs(const LoopState& state, int64_t m, cudaStream_t s) {
  QUIVER_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(state.normed.data(), state.x_init.data(),
                                              static_cast<size_t>(m * kLoopHidden) * 2,
                                              cudaMemcpyDeviceToDevice, s));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(state.residual.data(), state.residual_init.data(),
                                              static_cast<size_t>(m * kLoopHidden) * 4,
                                              cudaMemcpyDeviceToDevice, s));
  return absl::OkStatus();
}

// Enqueues every layer on `s` (capturable once BlasLt has chosen the GEMMs' algorithms).
absl::Status LoopForward(const LoopState& state, const LoopBatch& batch, cu::BlasLt& blaslt,
                         cudaStream_t s) {
  const int64_t m = batch.m;
  auto gemm = [&](const void* x, int64_t k, const cu::DeviceBuffer& w, int64_t n, void* y) {
    cu::GemmArgs args;
    args.x = x;
    args.w = w.data();
    args.y = y;
    args.m = m;
    args.n = n;
    args.k = k;
    args.ldx = k;
    args.ldw = k;
    args.ldy = n;
    return blaslt.Gemm(args, s);
  };
  auto add_norm = [&](const cu::DeviceBuffer& gamma) {
    cu::AddNormArgs args;
    args.residual = state.residual.as<float>();
    args.add = state.proj.data();
    args.add_stride = kLoopHidden;
    args.norm = cu::NormKind::kRmsNorm;
    args.gamma = gamma.as<float>();
    args.eps = 1e-6f;
    args.normed = state.normed.data();
    args.normed_stride = kLoopHidden;
    args.num_tokens = m;
    args.hidden = kLoopHidden;
    args.act = DType::kBF16;
    return Launch(cu::AddNorm(args, s), "AddNorm");
  };
  for (const LoopLayer& layer : state.layers) {
    QUIVER_RETURN_IF_ERROR(
        gemm(state.normed.data(), kLoopHidden, layer.qkv_w, kLoopQkv, state.qkv.data()));
    const cu::RaggedAttentionArgs attention =
        FusedArgs(state.qkv.data(), kLoopHeads, kLoopKvHeads, kLoopHeadDim, state.ctx.data(),
                  DType::kBF16, batch.device_cu_seqlens, batch.num_seqs, m, batch.max_seqlen,
                  /*causal=*/false);
    QUIVER_RETURN_IF_ERROR(Launch(cu::VarlenFlashAttention(attention, s), "VarlenFlashAttention"));
    QUIVER_RETURN_IF_ERROR(
        gemm(state.ctx.data(), kLoopHidden, layer.o_w, kLoopHidden, state.proj.data()));
    QUIVER_RETURN_IF_ERROR(add_norm(layer.attn_gamma));
    QUIVER_RETURN_IF_ERROR(gemm(state.normed.data(), kLoopHidden, layer.gate_up_w, 2 * kLoopInter,
                                state.gate_up.data()));
    QUIVER_RETURN_IF_ERROR(
        Launch(cu::SiluMul(state.gate_up.data(), 2 * kLoopInter, state.act.data(), kLoopInter, m,
                           kLoopInter, DType::kBF16, s),
               "SiluMul"));
    QUIVER_RETURN_IF_ERROR(
        gemm(state.act.data(), kLoopInter, layer.down_w, kLoopHidden, state.proj.data()));
    QUIVER_RETURN_IF_ERROR(add_norm(layer.mlp_gamma));
  }
  return absl::OkStatus();
}

// An instantiated CUDA graph (owned).
class GraphExec {
 public:
  GraphExec() = default;
  explicit GraphExec(cudaGraphExec_t exec) : exec_(exec) {}
  ~GraphExec() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  }
  GraphExec(GraphExec&& o) noexcept : exec_(std::exchange(o.exec_, nullptr)) {}
  GraphExec& operator=(GraphExec&& o) noexcept {
    std::swap(exec_, o.exec_);
    return *this;
  }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;

  absl::Status Launch(cudaStream_t s) const {
    QUIVER_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec_, s));
    return absl::OkStatus();
  }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

struct CaptureTimes {
  double capture_ms = 0.0, instantiate_ms = 0.0;
};

// Captures what `enqueue` puts on `s` (thread-local capture mode) and instantiates it. A failure
// inside the capture still ends it, so the stream is usable afterwards.
absl::StatusOr<GraphExec> CaptureGraph(cudaStream_t s, const std::function<absl::Status()>& enqueue,
                                       CaptureTimes* times) {
  const auto start = std::chrono::steady_clock::now();
  QUIVER_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const absl::Status body = enqueue();
  cudaGraph_t graph = nullptr;
  const absl::Status end = cu::CudaStatus(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
  const auto captured = std::chrono::steady_clock::now();
  auto destroy_graph = [&]() {
    if (graph != nullptr) cudaGraphDestroy(graph);
  };
  if (!body.ok() || !end.ok()) {
    destroy_graph();
    return body.ok() ? end : body;
  }
  cudaGraphExec_t exec = nullptr;
  const absl::Status instantiated =
      cu::CudaStatus(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  destroy_graph();
  QUIVER_RETURN_IF_ERROR(instantiated);
  if (times != nullptr) {
    times->capture_ms = std::chrono::duration<double, std::milli>(captured - start).count();
    times->instantiate_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - captured)
            .count();
  }
  return GraphExec(exec);
}

// The loop's outputs (normed bf16 and residual f32 rows of the batch) as bytes.
absl::StatusOr<std::vector<uint8_t>> LoopOutputs(const LoopState& state, int64_t m,
                                                 cudaStream_t s) {
  const size_t normed_bytes = static_cast<size_t>(m * kLoopHidden) * 2;
  const size_t residual_bytes = static_cast<size_t>(m * kLoopHidden) * 4;
  std::vector<uint8_t> out(normed_bytes + residual_bytes);
  QUIVER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  QUIVER_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out.data(), state.normed.data(), normed_bytes, cudaMemcpyDeviceToHost, s));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.data() + normed_bytes, state.residual.data(),
                                              residual_bytes, cudaMemcpyDeviceToHost, s));
  QUIVER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  return out;
}

// Non-finite values among the outputs (bf16 normed rows, then f32 residual rows).
int64_t NonFinite(const std::vector<uint8_t>& out, int64_t m) {
  int64_t bad = 0;
  const size_t normed = static_cast<size_t>(m * kLoopHidden);
  for (size_t i = 0; i < normed; ++i) bad += !std::isfinite(DecodeAt(out, DType::kBF16, i));
  for (size_t i = 0; i < normed; ++i) {
    float f;
    std::memcpy(&f, out.data() + 2 * normed + 4 * i, 4);
    bad += !std::isfinite(f);
  }
  return bad;
}

// Eager (algorithms chosen), capture, then eager and replay from the same inputs: the number of
// output bytes that differ (the replay must be bit-for-bit the eager run), and that the outputs
// are finite. The graph is returned for timing.
absl::StatusOr<GraphExec> CheckGraphEqualsEager(Report& report, Gpu& gpu, const LoopState& state,
                                                const LoopBatch& batch, const std::string& tag) {
  const cudaStream_t s = gpu.s();
  auto forward = [&]() { return LoopForward(state, batch, *gpu.blaslt, s); };
  QUIVER_RETURN_IF_ERROR(ResetLoopInputs(state, batch.m, s));
  QUIVER_RETURN_IF_ERROR(forward());  // BlasLt chooses here: it refuses to during a capture
  QUIVER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
  QUIVER_ASSIGN_OR_RETURN(GraphExec graph, CaptureGraph(s, forward, nullptr));

  QUIVER_RETURN_IF_ERROR(ResetLoopInputs(state, batch.m, s));
  QUIVER_RETURN_IF_ERROR(forward());
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> eager, LoopOutputs(state, batch.m, s));
  QUIVER_RETURN_IF_ERROR(ResetLoopInputs(state, batch.m, s));
  QUIVER_RETURN_IF_ERROR(graph.Launch(s));
  QUIVER_ASSIGN_OR_RETURN(std::vector<uint8_t> replay, LoopOutputs(state, batch.m, s));
  int64_t differing = 0;
  for (size_t i = 0; i < eager.size(); ++i) differing += eager[i] != replay[i];
  report.Expect(absl::StrCat("graph_replay_equals_eager_", tag, "_differing_bytes"),
                static_cast<double>(differing), 0.0);
  report.Expect(absl::StrCat("graph_eager_output_", tag, "_non_finite"),
                static_cast<double>(NonFinite(eager, batch.m)), 0.0);
  return graph;
}

void RunGraphs(Report& report, Gpu& gpu, const Options& options) {
  const cudaStream_t s = gpu.s();
  const int num_layers = options.quick ? 2 : 28;
  const int latency_reps = options.quick ? 5 : 50;
  const int captures = options.quick ? 3 : 20;
  constexpr int64_t kSeqlen = 128, kManySeqs = 8;
  report.Metric("layers", num_layers);

  absl::StatusOr<LoopState> state = MakeLoopState(num_layers, kSeqlen * kManySeqs, s);
  if (!state.ok()) {
    report.Error("graph_loop_setup", state.status());
    return;
  }
  const std::vector<int32_t> one_seq = {0, static_cast<int32_t>(kSeqlen)};
  std::vector<int32_t> many_seqs = {0};
  for (int64_t i = 0; i < kManySeqs; ++i) many_seqs.push_back(many_seqs.back() + kSeqlen);
  absl::StatusOr<cu::DeviceBuffer> d_one = ToDevice(one_seq, s);
  absl::StatusOr<cu::DeviceBuffer> d_many = ToDevice(many_seqs, s);
  if (!d_one.ok() || !d_many.ok()) {
    report.Error("graph_loop_setup", d_one.ok() ? d_many.status() : d_one.status());
    return;
  }
  const LoopBatch batch{kSeqlen, 1, kSeqlen, d_one->as<int32_t>()};
  const LoopBatch batch_many{kSeqlen * kManySeqs, kManySeqs, kSeqlen, d_many->as<int32_t>()};
  auto forward = [&]() { return LoopForward(*state, batch, *gpu.blaslt, s); };

  // 1 sequence of 128 tokens: equality, capture cost, latency.
  absl::StatusOr<GraphExec> graph = CheckGraphEqualsEager(report, gpu, *state, batch, "m128");
  if (!graph.ok()) {
    report.Error("graph_replay_equals_eager_m128", graph.status());
  } else {
    absl::Status cost = [&]() -> absl::Status {
      QUIVER_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
      size_t free_before = 0, free_after = 0, total = 0;
      QUIVER_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_before, &total));
      std::vector<GraphExec> graphs;
      double capture_ms = 0.0, instantiate_ms = 0.0;
      for (int i = 0; i < captures; ++i) {
        CaptureTimes times;
        QUIVER_ASSIGN_OR_RETURN(GraphExec made, CaptureGraph(s, forward, &times));
        graphs.push_back(std::move(made));
        capture_ms += times.capture_ms;
        instantiate_ms += times.instantiate_ms;
      }
      QUIVER_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
      QUIVER_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_after, &total));
      const double per_graph_mb =
          (static_cast<double>(free_before) - static_cast<double>(free_after)) / captures /
          (1 << 20);
      report.Metric("capture_ms", capture_ms / captures);
      report.Metric("instantiate_ms", instantiate_ms / captures);
      report.Metric("graph_device_mb", per_graph_mb);
      return absl::OkStatus();
    }();
    if (!cost.ok()) report.Error("graph_capture_cost", cost);

    absl::Status latency = [&]() -> absl::Status {
      QUIVER_RETURN_IF_ERROR(ResetLoopInputs(*state, batch.m, s));
      QUIVER_ASSIGN_OR_RETURN(std::vector<float> eager, TimeRuns(latency_reps, s, forward));
      QUIVER_RETURN_IF_ERROR(ResetLoopInputs(*state, batch.m, s));
      QUIVER_ASSIGN_OR_RETURN(std::vector<float> replay,
                              TimeRuns(latency_reps, s, [&]() { return graph->Launch(s); }));
      const double eager_ms = Median(eager), replay_ms = Median(replay);
      report.Metric("eager_ms", eager_ms);
      report.Metric("replay_ms", replay_ms);
      report.Metric("speedup", eager_ms / replay_ms);
      report.Expect("goal_graph_speedup_m128", eager_ms / replay_ms, 3.0, ">=", /*goal=*/true,
                    "eager / replay median ms of the 128-token loop");
      return absl::OkStatus();
    }();
    if (!latency.ok()) report.Error("graph_latency", latency);
  }
  graph = GraphExec();  // release before the next batch's graph

  if (options.checkpoint) options.checkpoint();
  // 8 sequences of 128 tokens: equality only.
  absl::StatusOr<GraphExec> graph_many =
      CheckGraphEqualsEager(report, gpu, *state, batch_many, "m1024_8seqs");
  if (!graph_many.ok()) report.Error("graph_replay_equals_eager_m1024_8seqs", graph_many.status());
}

// ---------------------------------------------------------------------------------------------
// Summary.

// The report of one stage, from its JSON file.
struct StageSummary {
  bool ok = false;
  bool complete = true;  // false: a checkpoint of a stage that did not finish
  int64_t checks_total = 0, checks_failed = 0;
  std::vector<std::pair<std::string, double>> metrics;
  std::vector<std::string> notable;  // failed checks and goal checks, one line each
  std::string error;
};

absl::StatusOr<StageSummary> ReadStageSummary(const std::string& path) {
  QUIVER_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  QUIVER_ASSIGN_OR_RETURN(JsonValue doc, JsonValue::Parse(text));
  StageSummary summary;
  QUIVER_ASSIGN_OR_RETURN(summary.ok, JsonBool(doc, "ok", false));
  QUIVER_ASSIGN_OR_RETURN(summary.complete, JsonBool(doc, "complete", true));
  QUIVER_ASSIGN_OR_RETURN(summary.checks_total, JsonInt(doc, "checks_total", 0));
  QUIVER_ASSIGN_OR_RETURN(summary.checks_failed, JsonInt(doc, "checks_failed", 0));
  if (const JsonValue* error = doc.Find("error"); error != nullptr && error->is_string()) {
    summary.error = error->as_string();
  }
  if (const JsonValue* metrics = doc.Find("metrics"); metrics != nullptr && metrics->is_object()) {
    for (const auto& [key, value] : metrics->members()) {
      summary.metrics.emplace_back(key, value.is_number() ? value.as_double() : kNaN);
    }
  }
  if (const JsonValue* checks = doc.Find("checks"); checks != nullptr && checks->is_array()) {
    for (const JsonValue& check : checks->items()) {
      const bool ok = JsonBool(check, "ok", false).value_or(false);
      const bool goal = JsonBool(check, "goal", false).value_or(false);
      if (ok && !goal) continue;
      const JsonValue* value = check.Find("value");
      const JsonValue* limit = check.Find("limit");
      std::string line = absl::StrCat(
          goal ? "goal " : "FAILED ", JsonString(check, "name", "?").value_or("?"), ": ",
          ok ? "met" : "not met", ", value ",
          value != nullptr && value->is_number() ? absl::StrCat(value->as_double()) : "null", " ",
          JsonString(check, "compare", "?").value_or("?"), " ",
          limit != nullptr && limit->is_number() ? absl::StrCat(limit->as_double()) : "null");
      if (const std::string error = JsonString(check, "error", "").value_or(""); !error.empty()) {
        absl::StrAppend(&line, " (", error, ")");
      }
      if (const std::string note = JsonString(check, "note", "").value_or("");
          goal && !note.empty()) {
        absl::StrAppend(&line, " [", note, "]");
      }
      summary.notable.push_back(std::move(line));
    }
  }
  return summary;
}

// The numbers the summary shows of a stage; every metric of the stages not listed here. The
// engine-level stages record far more than a table holds: their JSON has the rest.
std::vector<std::string> KeyMetrics(std::string_view stage) {
  std::vector<std::string> keys;
  if (stage == "models") {
    keys = {"fixtures_worst_gpu_vs_hf_cos", "qwen3_0p6b_gpu_vs_cpu_f32_min_cos",
            "qwen3_0p6b_gpu_vs_cpu_f32_max_rel_err", "qwen3_0p6b_cpu_forward_s"};
  } else if (stage == "engine") {
    keys = {"peak_tflops"};
    for (const char* tag : {"minilm", "qwen3_0p6b"}) {
      for (const char* key :
           {"eager_1x128_ms", "replay_1x128_ms", "graph_speedup_1x128", "eager_100x128_ms",
            "replay_100x128_ms", "capture_ms_per_graph", "graph_mib_per_graph",
            "100x512_tokens_per_s", "100x512_mfu", "100x512_graphs_off_tokens_per_s",
            "sweep_peak_tokens_per_s", "sweep_knee_tokens", "latency_1x512_ms", "latency_1x4096_ms",
            "batch100x128_4clients_tokens_per_s", "clients16_1x128_requests_per_s",
            "clients16_1x128_p99_ms"}) {
        keys.push_back(absl::StrCat(tag, "_", key));
      }
    }
    for (const char* docs : {"5", "25", "50"}) {
      keys.push_back(absl::StrCat("qwen3_0p6b_reranker_score_", docs, "x512_ms"));
    }
  } else if (stage == "peer") {
    keys = {"quiver_replay_1x128_ms", "st_fp32_1x128_ms", "st_bf16_1x128_ms", "speedup_vs_st_fp32",
            "speedup_vs_st_best"};
  }
  return keys;
}

int RunSummary(const std::string& dir) {
  static constexpr const char* kStages[] = {"ceilings", "kernels", "attention", "graphs",
                                            "models",   "engine",  "peer"};
  constexpr size_t kWidth = 71;  // numbers wrap onto indented lines: 100 columns in all
  int found = 0;
  bool all_ok = true;
  std::printf("%-10s %-7s %-9s %s\n", "stage", "ok", "checks", "key numbers");
  std::vector<std::string> details;
  for (const char* stage : kStages) {
    const std::string path = absl::StrCat(dir, "/", stage, ".json");
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      std::printf("%-10s %-7s\n", stage, "absent");
      continue;
    }
    ++found;
    absl::StatusOr<StageSummary> summary = ReadStageSummary(path);
    if (!summary.ok()) {
      all_ok = false;
      std::printf("%-10s %-7s %s\n", stage, "unread", summary.status().ToString().c_str());
      continue;
    }
    all_ok = all_ok && summary->ok && summary->complete;
    const std::vector<std::string> keys = KeyMetrics(stage);
    std::vector<std::string> numbers;
    for (const auto& [key, value] : summary->metrics) {
      if (keys.empty() || std::find(keys.begin(), keys.end(), key) != keys.end()) {
        numbers.push_back(absl::StrCat(key, "=", value));
      }
    }
    std::vector<std::string> lines(1);
    for (const std::string& number : numbers) {
      if (!lines.back().empty() && lines.back().size() + number.size() + 2 > kWidth) {
        lines.emplace_back();
      }
      absl::StrAppend(&lines.back(), lines.back().empty() ? "" : ", ", number);
    }
    const std::string checks =
        absl::StrCat(summary->checks_total - summary->checks_failed, "/", summary->checks_total);
    const char* status = !summary->complete ? "PARTIAL" : summary->ok ? "ok" : "FAILED";
    std::printf("%-10s %-7s %-9s %s\n", stage, status, checks.c_str(), lines[0].c_str());
    for (size_t i = 1; i < lines.size(); ++i) std::printf("%29s%s\n", "", lines[i].c_str());
    if (!summary->complete) {
      details.push_back(absl::StrCat(stage, ": did not finish (stopped by its time limit?)"));
    }
    if (!summary->error.empty()) details.push_back(absl::StrCat(stage, ": error ", summary->error));
    for (const std::string& line : summary->notable)
      details.push_back(absl::StrCat(stage, ": ", line));
  }
  for (const std::string& line : details) std::printf("  %s\n", line.c_str());
  if (found == 0) {
    std::printf("no stage report in %s\n", dir.c_str());
    return kExitNoDevice;
  }
  return all_ok ? kExitOk : kExitFailed;
}

// ---------------------------------------------------------------------------------------------
// Command line.

void Usage() {
  std::fprintf(stderr,
               "usage: quiver_gpu_check --probe\n"
               "       quiver_gpu_check --stage=ceilings|kernels|attention|graphs|models|engine "
               "--json FILE [--quick] [--ceilings FILE_OR_DIR] [--fixtures DIR] [--work DIR]\n"
               "       quiver_gpu_check --summary DIR\n");
}

std::optional<Options> ParseArgs(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    // "--name=value" or "--name value".
    auto value_of = [&](std::string_view name, std::string* out) {
      if (arg.substr(0, name.size()) != name) return false;
      if (arg.size() == name.size()) {
        if (i + 1 >= argc) return false;
        *out = argv[++i];
        return true;
      }
      if (arg[name.size()] != '=') return false;
      *out = std::string(arg.substr(name.size() + 1));
      return true;
    };
    if (arg == "--probe") {
      options.probe = true;
    } else if (arg == "--quick") {
      options.quick = true;
    } else if (value_of("--stage", &options.stage) || value_of("--json", &options.json_path) ||
               value_of("--summary", &options.summary_dir) ||
               value_of("--ceilings", &options.ceilings_path) ||
               value_of("--fixtures", &options.fixtures_dir) ||
               value_of("--work", &options.work_dir)) {
    } else {
      std::fprintf(stderr, "unknown argument: %s\n", argv[i]);
      return std::nullopt;
    }
  }
  return options;
}

int RunProbe() {
  absl::StatusOr<DeviceInfo> info = ProbeDevice();
  if (!info.ok()) {
    std::printf("no usable CUDA device: %s\n", info.status().ToString().c_str());
    return kExitNoDevice;
  }
  PrintDevice(*info);
  std::printf("device usable\n");
  return kExitOk;
}

int RunStage(const Options& given) {
  using StageFn = void (*)(Report&, Gpu&, const Options&);
  StageFn fn = nullptr;
  if (given.stage == "ceilings") {
    fn = &RunCeilings;
  } else if (given.stage == "kernels") {
    fn = &RunKernels;
  } else if (given.stage == "attention") {
    fn = &RunAttention;
  } else if (given.stage == "graphs") {
    fn = &RunGraphs;
  } else if (given.stage == "models") {
    fn = [](Report& report, Gpu&, const Options& options) { RunModelsStage(report, options); };
  } else if (given.stage == "engine") {
    fn = [](Report& report, Gpu&, const Options& options) { RunEngineStage(report, options); };
  } else {
    std::fprintf(stderr, "unknown stage '%s'\n", given.stage.c_str());
    Usage();
    return kExitFailed;
  }
  if (given.json_path.empty()) {
    std::fprintf(stderr, "--stage needs --json FILE\n");
    return kExitFailed;
  }
  const auto start = std::chrono::steady_clock::now();
  Report report(given.stage, given.quick);
  std::printf("stage %s%s\n", given.stage.c_str(), given.quick ? " (quick)" : "");
  absl::StatusOr<DeviceInfo> info = ProbeDevice();
  int exit_code = kExitOk;
  if (!info.ok()) {
    report.Fail(info.status());
    exit_code = kExitNoDevice;
  } else {
    PrintDevice(*info);
    Options options = given;
    options.checkpoint = [&] {
      WriteTextFile(given.json_path, report.ToJson(&*info, SecondsSince(start), false))
          .IgnoreError();  // the final write reports a failure
    };
    absl::StatusOr<Gpu> gpu = MakeGpu();
    if (!gpu.ok()) {
      report.Fail(gpu.status());
    } else {
      // The library reports errors as statuses; an exception escaping a stage (the standard
      // library's, a bad_alloc) is a failure of the stage, not a crash without a report.
      try {
        fn(report, *gpu, options);
      } catch (const std::exception& e) {
        report.Fail(absl::InternalError(absl::StrCat("stage threw: ", e.what())));
      }
      // A sticky error (an illegal access) shows here if no check saw it.
      if (const absl::Status sync =
              cu::CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
          !sync.ok()) {
        report.Fail(sync);
      }
    }
    if (!report.ok()) exit_code = kExitFailed;
  }
  const std::string json = report.ToJson(info.ok() ? &*info : nullptr, SecondsSince(start));
  if (const absl::Status written = WriteTextFile(given.json_path, json); !written.ok()) {
    std::printf("%s\n", written.ToString().c_str());
    if (exit_code == kExitOk) exit_code = kExitFailed;
  }
  std::printf("stage %s: %s (%d failed checks), report %s\n", given.stage.c_str(),
              report.ok() ? "ok" : "FAILED", report.failed_checks(), given.json_path.c_str());
  return exit_code;
}

int Main(int argc, char** argv) {
  const std::optional<Options> options = ParseArgs(argc, argv);
  if (!options.has_value()) {
    Usage();
    return kExitFailed;
  }
  if (options->probe) return RunProbe();
  if (!options->summary_dir.empty()) return RunSummary(options->summary_dir);
  if (!options->stage.empty()) return RunStage(*options);
  Usage();
  return kExitFailed;
}

}  // namespace
}  // namespace quiver::gpu_check

int main(int argc, char** argv) { return quiver::gpu_check::Main(argc, argv); }
