// Linear layers: y = x · Wᵀ + bias with a fused epilogue, on weights prepared once per device at
// load (PrepareLinear). W is a PyTorch Linear weight, f32 [out_features, in_features].
//
//   Linear              y [num_tokens, out] = epilogue(x [num_tokens, in] · Wᵀ + bias)
//   LinearAddLayerNorm  io [num_tokens, out] = LayerNorm(io + x · Wᵀ + bias): a post-LN block's
//                       output projection, residual and norm in one pass
//
// Device: the weights' device (ctx.device). Thread-safety: weights are immutable after
// PrepareLinear and may be read by any number of calls at once.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/attention/backend.h"
#include "engine/base/attention_plan.h"
#include "engine/base/exec_context.h"
#include "engine/base/op_types.h"
#include "engine/base/tensor.h"

namespace quiver::engine::ops {

// The device's own form of a layer's weights (CPU: packed panels for kernels/cpu/gemm.h, whose
// products never depend on the batch around a row). Opaque to callers.
class PreparedLinear {
 public:
  virtual ~PreparedLinear() = default;
};

// How a layer's weights are kept: f32, or (CPU only) int8 per output channel with activations
// quantized per row as the layer runs (kernels/cpu/gemm_int8.h; `--quantize int8`), or bf16 with
// activations rounded to bf16 as the layer runs (kernels/cpu/gemm_bf16.h; `--quantize bf16`,
// where the host has AVX512_BF16).
enum class WeightPrecision { kF32, kInt8, kBf16 };
const char* WeightPrecisionName(WeightPrecision p);  // "f32", "int8", "bf16"
// Whether this host can run `p` (bf16: AVX512_BF16 and the avx512 path or above).
bool WeightPrecisionSupported(Device device, WeightPrecision p);
// Whether a model whose Linear layers keep `weights` takes attention's products in bf16 too: on
// the CPU with int8 or bf16 weights where bf16 products outrun f32 ones there
// (cpu::Bf16ProductsFast: AMX-BF16 tiles, or vdpbf16ps on AMD).
bool Bf16AttentionProducts(Device device, WeightPrecision weights);
// Whether it takes them in int16 instead (cpu::Int16ProductsSupported: vpdpwssd, twice the f32
// FMA's multiply-adds): on the CPU with int8 or bf16 weights where bf16 products do not outrun
// f32 ones and the path has AVX-512 VNNI (Intel cores without AMX-BF16 tiles).
bool Int16AttentionProducts(Device device, WeightPrecision weights);

struct LinearWeights {
  int64_t out_features = 0;
  int64_t in_features = 0;
  Device device = Device::kCpu;
  WeightPrecision precision = WeightPrecision::kF32;
  Tensor bias;  // f32 [out_features] on the device, or empty
  std::shared_ptr<const PreparedLinear> prepared;

  bool ready() const { return prepared != nullptr; }
};

// The weights for `device` from f32 [out, in] host `weight` (copied into the device's form) and
// an optional f32 [out] `bias` on the device (referenced: it must stay valid). kInt8 runs on the
// CPU only (an OpError elsewhere).
LinearWeights PrepareLinear(Device device, Tensor weight, Tensor bias,
                            WeightPrecision precision = WeightPrecision::kF32);

using ::quiver::engine::Epilogue;  // base/op_types.h

// x f32 [num_tokens, in], y f32 [num_tokens, out], residual f32 [num_tokens, out] for kResidual
// only (and never y itself); all contiguous.
void Linear(const ExecContext& ctx, const Tensor& x, const LinearWeights& w, const Tensor& y,
            Epilogue epilogue = Epilogue::kNone, const Tensor& residual = {});

// io f32 [num_tokens, out] = LayerNorm(io + x · Wᵀ + bias) with gamma, beta f32 [out];
// scratch [num_tokens, out] (contents undefined after): f32, or on CUDA bf16 (the product is
// rounded to bf16 before it is added to the f32 io). normed: optional, CUDA only, of scratch's
// type: the new rows of io again (the next GEMM's bf16 input, from the same pass).
void LinearAddLayerNorm(const ExecContext& ctx, const Tensor& x, const LinearWeights& w,
                        const Tensor& io, const Tensor& gamma, const Tensor& beta, float eps,
                        const Tensor& scratch, const Tensor& normed = {});

// A post-LN block's feed-forward: inter = epilogue(x · Upᵀ + b_up), then
// io = LayerNorm(io + inter · Downᵀ + b_down), i.e. Linear(x, up, inter, epilogue) followed by
// LinearAddLayerNorm(inter, down, io, ...), with the same arguments and the same results. Where
// x is io itself on the CPU, the layers' weights share one form (f32, int8 or bf16) and the
// batch is long enough, the two run fused per block of rows (kernels/cpu/kernels.h,
// FeedForwardAddLayerNorm: the intermediate stays in cache; the same bits; inter and scratch
// are then not written). epilogue: kNone, kGeluErf or kGeluTanh.
//
// With `first`, the attention's output projection and its residual + LayerNorm run before, as
// LinearAddLayerNorm(first->attended, *first->o, io, first->gamma, first->beta, eps, scratch,
// normed) would (fused per block of rows too where the rest is: BERT's whole post-LN layer after
// attention).
struct AttentionOutputArgs {
  Tensor attended;  // [num_tokens, o->in_features]
  const LinearWeights* o = nullptr;
  Tensor gamma, beta;  // f32 [out]
};
void FeedForwardAddLayerNorm(const ExecContext& ctx, const Tensor& x, const LinearWeights& up,
                             Epilogue epilogue, const LinearWeights& down, const Tensor& io,
                             const Tensor& gamma, const Tensor& beta, float eps,
                             const Tensor& inter, const Tensor& scratch, const Tensor& normed = {},
                             const AttentionOutputArgs* first = nullptr);

// A self-attention's fused projection and the attention over it: qkv = x · Wᵀ + bias, then
// Attention(backend, plan) over its columns q = [0, q_width), k = [q_width, q_width + kv_width),
// v = the next kv_width (q_width = plan.num_heads · head_dim, kv_width = plan.num_kv_heads ·
// head_dim, W [q_width + 2 kv_width, in]) into out [num_tokens, q_width]; i.e. Linear(x, w, qkv)
// followed by ops::Attention, with the same arguments and the same results. On the CPU with the
// flash backend and a batch of many sequences, the two run per sequence on one thread
// (kernels/cpu/kernels.h, QkvAttention: its qkv rows are still in cache for its attention; the
// same bits); with f32 weights and a few sequences, per (sequence, head) on one thread
// (QkvAttentionByHeads). qkv is a workspace: the fused paths leave the rows of short sequences
// (by heads: every row) unwritten.
void QkvAttention(const ExecContext& ctx, const Tensor& x, const LinearWeights& w,
                  const Tensor& qkv, const AttentionBackend& backend, const AttentionPlan& plan,
                  const Tensor& out);

// BERT's post-LN encoder layer after the embeddings, in place on x [num_tokens, hidden]:
// QkvAttention(x, *qkv, qkv, backend, plan, attended), then FeedForwardAddLayerNorm(x, *up,
// epilogue, *down, x, ln2, eps, inter, scratch, {}, &first) with first = {attended, o, ln1}; the
// same arguments and the same results. On the CPU with the flash backend, the four layers'
// weights in int8 and a batch of many short sequences (cpu::PostLnLayerBySequenceFits), the
// whole layer per sequence on one thread (kernels/cpu/kernels.h, PostLnLayerBySequence: a
// sequence's rows stay in its thread's cache across the layer; the same bits): qkv, attended,
// inter and scratch are then not written.
struct PostLnLayerArgs {
  const LinearWeights* qkv = nullptr;
  const LinearWeights* o = nullptr;
  Tensor ln1_gamma, ln1_beta;  // f32 [hidden]
  const LinearWeights* up = nullptr;
  Epilogue epilogue = Epilogue::kNone;  // kNone, kGeluErf or kGeluTanh
  const LinearWeights* down = nullptr;
  Tensor ln2_gamma, ln2_beta;  // f32 [hidden]
};
void PostLnLayer(const ExecContext& ctx, const Tensor& x, const PostLnLayerArgs& layer,
                 const AttentionBackend& backend, const AttentionPlan& plan, float eps,
                 const Tensor& qkv, const Tensor& attended, const Tensor& inter,
                 const Tensor& scratch);

}  // namespace quiver::engine::ops
