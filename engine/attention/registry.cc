#include "engine/attention/registry.h"

#include "common/strings.h"
#include "engine/kernels/cpu/attention.h"
#ifdef QUIVER_WITH_CUDA
#include "engine/attention/cuda_backends.h"
#endif

namespace quiver::engine {
namespace {

// A CPU kernel of kernels/cpu/attention.h as a backend: the pool comes from the context.
class CpuAttention final : public AttentionBackend {
 public:
  CpuAttention(std::string_view name, cpu::AttentionKernel kernel, bool masks)
      : name_(name), kernel_(kernel), masks_(masks) {}
  std::string_view name() const override { return name_; }
  Device device() const override { return Device::kCpu; }
  DType dtype() const override { return DType::kF32; }
  bool SupportsMasks() const override { return masks_; }
  void Run(const ExecContext& ctx, const AttentionPlan& plan, const Tensor& q, const Tensor& k,
           const Tensor& v, const Tensor& out) const override {
    kernel_(plan, q.f32(), q.row_stride(), k.f32(), v.f32(), k.row_stride(), out.f32(), *ctx.pool);
  }

 private:
  std::string_view name_;
  cpu::AttentionKernel kernel_;
  bool masks_;
};

struct Entry {
  Device device;
  std::string_view name;
  std::unique_ptr<AttentionBackend> (*make)();
};

// Reference and flash run sliding windows and position biases; packed and tiled do not.
template <cpu::AttentionKernel kKernel, bool kMasks = false>
std::unique_ptr<AttentionBackend> MakeCpu(std::string_view name) {
  return std::make_unique<CpuAttention>(name, kKernel, kMasks);
}

constexpr Entry kBackends[] = {
    {Device::kCpu, "reference", [] { return MakeCpu<cpu::ReferenceAttention, true>("reference"); }},
    {Device::kCpu, "packed", [] { return MakeCpu<cpu::PackedAttention>("packed"); }},
    {Device::kCpu, "tiled", [] { return MakeCpu<cpu::TiledAttention>("tiled"); }},
    {Device::kCpu, "flash", [] { return MakeCpu<cpu::FlashAttention, true>("flash"); }},
#ifdef QUIVER_WITH_CUDA
    {Device::kCuda, "cuda_varlen", MakeCudaVarlenAttention},
    {Device::kCuda, "cuda_reference", MakeCudaReferenceAttention},
    {Device::kCuda, "flashinfer_fa2", MakeFlashInferFa2Attention},
    {Device::kCuda, "flashinfer_fa3", MakeFlashInferFa3Attention},
#endif
};

}  // namespace

std::vector<std::string_view> AttentionBackendNames(Device device) {
  std::vector<std::string_view> names;
  for (const Entry& entry : kBackends) {
    if (entry.device == device) names.push_back(entry.name);
  }
  return names;
}

absl::StatusOr<std::unique_ptr<AttentionBackend>> MakeAttentionBackend(Device device,
                                                                       std::string_view name) {
  for (const Entry& entry : kBackends) {
    if (entry.device == device && entry.name == name) return entry.make();
  }
  const std::vector<std::string_view> names = AttentionBackendNames(device);
  if (names.empty()) {
    return absl::InvalidArgumentError(
        StrCat("no attention backend for device ", DeviceName(device), " in this build"));
  }
  return absl::InvalidArgumentError(StrCat("unknown attention backend '", name, "' for ",
                                           DeviceName(device), " (",
                                           fmt::format("{}", fmt::join(names, ", ")), ")"));
}

}  // namespace quiver::engine
