// CPU kernels: raw pointers and sizes, row-major f32, no tensors, no validation (ops/ checks
// shapes once per call and dispatches here). Loops are written for the vector units (x86-64-v3:
// AVX2 and FMA, with glibc's vector exp/erf/tanh); parallel ones take the thread pool. Every
// product runs on the packed GEMM (gemm.h), never BLAS: BLAS kernels may sum a row differently
// depending on where it sits in the matrix (OpenBLAS 0.3.21 on AMD Zen 3 did, for the small
// classifier heads).
//
// Every kernel computes an element from its own row only, in a fixed order: a sequence's result
// never depends on the batch around it (tests/engine/invariance_test.cc).
#pragma once

#include <cstdint>

#include "engine/base/attention_plan.h"
#include "engine/base/op_types.h"
#include "engine/kernels/cpu/gemm.h"
#include "engine/kernels/cpu/gemm_bf16.h"
#include "engine/kernels/cpu/gemm_int16.h"
#include "engine/kernels/cpu/gemm_int8.h"

namespace quiver::engine {
class ThreadPool;
}

namespace quiver::engine::cpu {

// y[m, n] = epilogue(x[m, k] · Wᵀ + bias) with W packed at load (gemm.h), spread over the pool
// in tiles. `residual` [m, n] is read for Epilogue::kResidual only and must not alias y.
void Linear(ThreadPool& pool, const float* x, const PackedWeights& w, const float* bias, float* y,
            int64_t m, Epilogue epilogue = Epilogue::kNone, const float* residual = nullptr);

// io[m, n] = LayerNorm(io + x · Wᵀ + bias): a post-LN block's output projection, residual and
// LayerNorm fused per tile of whole rows. `scratch` holds at least [m, n] floats.
void LinearAddLayerNorm(ThreadPool& pool, const float* x, const PackedWeights& w, const float* bias,
                        float* io, const float* gamma, const float* beta, float* scratch, int64_t m,
                        float eps);

// The same with int8 weights (gemm_int8.h): x's rows quantized per row first, over the pool.
void Linear(ThreadPool& pool, const float* x, const QuantizedWeights& w, const float* bias,
            float* y, int64_t m, Epilogue epilogue = Epilogue::kNone,
            const float* residual = nullptr);
void LinearAddLayerNorm(ThreadPool& pool, const float* x, const QuantizedWeights& w,
                        const float* bias, float* io, const float* gamma, const float* beta,
                        float* scratch, int64_t m, float eps);

// The same with bf16 weights (gemm_bf16.h): each tile rounds its own rows of x to bf16 just
// before its product. Only where Bf16Supported().
void Linear(ThreadPool& pool, const float* x, const Bf16Weights& w, const float* bias, float* y,
            int64_t m, Epilogue epilogue = Epilogue::kNone, const float* residual = nullptr);
void LinearAddLayerNorm(ThreadPool& pool, const float* x, const Bf16Weights& w, const float* bias,
                        float* io, const float* gamma, const float* beta, float* scratch, int64_t m,
                        float eps);

// io[m, n] = LayerNorm(io + epilogue(io · Upᵀ + up_bias) · Downᵀ + down_bias): a post-LN
// block's feed-forward (Up [inter, n], Down [n, inter]; int8, f32 or bf16 weights), fused per
// block of kFeedForwardRows rows, each block whole on one thread: its [rows, inter] intermediate
// is still in cache when the down projection reads it, instead of streaming the whole batch's
// through memory. The same bits as Linear(up, epilogue) into inter, then LinearAddLayerNorm(down).
// Each block's intermediate and projections stay in buffers of the thread that runs it (never
// written back to memory). Used from one block per thread (FeedForwardIsFused);
// epilogue kNone, kGeluErf or kGeluTanh.
// With `first` set, each block first runs the attention's output projection and its residual +
// LayerNorm on its rows (io = LayerNorm(io + attended · Oᵀ + o_bias)), the same bits as
// LinearAddLayerNorm(attended, o): the whole post-LN layer after attention, per block of rows.
// f32 weights: up to kF32FeedForwardRows rows per thread, a block of three quarters of its share
// per thread and the rest in blocks of kF32FeedForwardTailRows (one block per thread below twice
// that), else blocks of about kF32FeedForwardStepRows; the intermediate kFeedForwardSlice columns
// at a time (kernels.cc, FeedForwardPlanOf and FeedForwardRows). bf16 weights on AMX tiles: blocks
// of kBf16FeedForwardRows from four of them per thread.
constexpr int64_t kFeedForwardRows = 64;
constexpr int64_t kBf16FeedForwardRows = 96;
constexpr int64_t kF32FeedForwardRows = 256;
constexpr int64_t kF32FeedForwardStepRows = 128;
constexpr int64_t kF32FeedForwardTailRows = 64;
constexpr int64_t kFeedForwardSlice = 256;
template <typename Weights>
struct AttentionOutputOf {
  const float* attended;  // [m, o->k()]
  const Weights* o;
  const float* bias;  // [n] or null
  const float* gamma;
  const float* beta;
};
using AttentionOutput = AttentionOutputOf<QuantizedWeights>;
bool FeedForwardIsFused(const ThreadPool& pool, int64_t m);
void FeedForwardAddLayerNorm(ThreadPool& pool, float* io, const QuantizedWeights& up,
                             const float* up_bias, Epilogue epilogue, const QuantizedWeights& down,
                             const float* down_bias, const float* gamma, const float* beta,
                             int64_t m, float eps, const AttentionOutput* first = nullptr);
void FeedForwardAddLayerNorm(ThreadPool& pool, float* io, const PackedWeights& up,
                             const float* up_bias, Epilogue epilogue, const PackedWeights& down,
                             const float* down_bias, const float* gamma, const float* beta,
                             int64_t m, float eps,
                             const AttentionOutputOf<PackedWeights>* first = nullptr);
void FeedForwardAddLayerNorm(ThreadPool& pool, float* io, const Bf16Weights& up,
                             const float* up_bias, Epilogue epilogue, const Bf16Weights& down,
                             const float* down_bias, const float* gamma, const float* beta,
                             int64_t m, float eps,
                             const AttentionOutputOf<Bf16Weights>* first = nullptr);

// qkv [m, n] = x [m, w.k()] · Wᵀ + bias (W [n, k] int8, f32 or bf16), then the flash backend's
// attention (attention.h) over its columns: q = [0, q_width), k = [q_width, q_width + kv_width),
// v the next kv_width (q_width = plan.num_heads · head_dim, kv_width = plan.num_kv_heads ·
// head_dim, n = q_width + 2 kv_width) into out [m, q_width]. Whole sequences per task, longest
// first: a sequence's qkv rows are still in its thread's cache when its attention reads them,
// instead of the whole batch's streaming through memory between the two; a sequence's rows up to
// thread_row_bytes go to a buffer of its thread rather than to qkv (whose rows for it are then
// left unwritten), so that they are never written back to memory either. The same bits as
// Linear(x, w) followed by FlashAttention. Worth it only with several sequences per thread and
// none too long for its share (QkvAttentionIsFused).
constexpr int64_t kQkvThreadRowBytes = int64_t{4} << 20;
bool QkvAttentionIsFused(const ThreadPool& pool, const AttentionPlan& plan);
void QkvAttention(ThreadPool& pool, const float* x, const QuantizedWeights& w, const float* bias,
                  float* qkv, const AttentionPlan& plan, float* out,
                  int64_t thread_row_bytes = kQkvThreadRowBytes);
void QkvAttention(ThreadPool& pool, const float* x, const PackedWeights& w, const float* bias,
                  float* qkv, const AttentionPlan& plan, float* out,
                  int64_t thread_row_bytes = kQkvThreadRowBytes);
void QkvAttention(ThreadPool& pool, const float* x, const Bf16Weights& w, const float* bias,
                  float* qkv, const AttentionPlan& plan, float* out,
                  int64_t thread_row_bytes = kQkvThreadRowBytes);

// BERT's whole post-LN encoder layer after the embeddings with int8 weights, io [m, n] =
// LayerNorm2(h + FFN(h)) with h = LayerNorm1(io + Attention(io · QKVᵀ + qkv_bias) · Oᵀ +
// o_bias), one sequence per task (longest first) on one thread from its projections to its last
// LayerNorm: QkvAttention's rows and attention, then FeedForwardAddLayerNorm's blocks with
// `first` over the sequence's rows, its attention's output in a buffer of the thread. A
// sequence's rows then stay in the thread's cache across the layer instead of passing through
// memory between the two (the attention's output, and io's rows read again from L3 by the output
// projection's LayerNorm: perf put the int8 path's waits there). The same bits as QkvAttention
// followed by FeedForwardAddLayerNorm with `first`. Where PostLnLayerBySequenceFits:
// QkvAttentionIsFused, FeedForwardIsFused and the longest sequence's projections within
// kQkvThreadRowBytes. Measured at 100 x 128 tokens on the Xeon of docs/benchmarks.md against the
// two steps (bench/pair_builds.sh): int8 1.052x on its amx path (10 rounds), 1.016x-1.02x on
// avx512_vnni; f32 0.99x and bf16 on AMX tiles 0.96x, which keep the two steps (f32 likely as
// it streams 4x int8's weights through L2 beside the sequence's rows, not measured; bf16's blocks
// of 96 rows do not divide a 128-token sequence).
// epilogue: kNone, kGeluErf or kGeluTanh.
struct PostLnLayer {
  const QuantizedWeights* qkv;  // [q_width + 2 kv_width, n]
  const float* qkv_bias;
  const QuantizedWeights* o;  // [n, q_width]
  const float* o_bias;
  const float* ln1_gamma;
  const float* ln1_beta;
  const QuantizedWeights* up;
  const float* up_bias;
  Epilogue epilogue;
  const QuantizedWeights* down;
  const float* down_bias;
  const float* ln2_gamma;
  const float* ln2_beta;
};
bool PostLnLayerBySequenceFits(const ThreadPool& pool, const AttentionPlan& plan,
                               int64_t qkv_width);
void PostLnLayerBySequence(ThreadPool& pool, float* io, const PostLnLayer& l,
                           const AttentionPlan& plan, float eps);

// The same product and attention for a few sequences, f32 weights: one task per (sequence, head)
// makes that head's q, k and v columns for the sequence (column ranges of the packed GEMM, the
// same sums) in a buffer of its thread and runs the head's attention over them at once, so the
// projections are read from the thread's cache rather than from the whole qkv's trip through
// memory, and one pass over the pool does both. qkv is not written. The same bits as Linear
// followed by FlashAttention. Worth it where QkvAttentionIsFused is not, with at least four
// (sequence, head) tasks per thread (batch-1 at 512 tokens: 3.3% faster on Zen 4 with 2 threads,
// docs/benchmarks.md), a head_dim of whole panels (a multiple of 16), and each sequence's
// q, k and v for a head within kQkvThreadRowBytes (QkvAttentionByHeadsFits).
bool QkvAttentionByHeadsFits(const ThreadPool& pool, const AttentionPlan& plan);
void QkvAttentionByHeads(ThreadPool& pool, const float* x, const PackedWeights& w,
                         const float* bias, const AttentionPlan& plan, float* out);

// x[m, n] = word[ids] (+ position[positions] if position is non-null) (+ type[type_ids] if type
// is non-null; type_ids null means all zeros), over the pool. With gamma non-null the row is
// then LayerNorm'ed (gamma, beta): BERT's embedding layer in one pass.
void Embedding(ThreadPool& pool, const int32_t* ids, const int32_t* positions,
               const int32_t* type_ids, const float* word, const float* position, const float* type,
               const float* gamma, const float* beta, float* x, int64_t m, int64_t n, float eps);

// out[rows, n] = LayerNorm(x) (out may alias x), over the pool.
void LayerNorm(ThreadPool& pool, const float* x, const float* gamma, const float* beta, float* out,
               int64_t rows, int64_t n, float eps);
// io[rows, n] = LayerNorm(io + add), over the pool.
void AddLayerNorm(ThreadPool& pool, float* io, const float* add, const float* gamma,
                  const float* beta, int64_t rows, int64_t n, float eps);

// residual[rows, n] += y; y = LayerNorm(residual): a pre-norm block's residual add and the next
// LayerNorm in one pass (ModernBERT), over the pool.
void AddPreLayerNorm(ThreadPool& pool, float* residual, float* y, const float* gamma,
                     const float* beta, int64_t rows, int64_t n, float eps);

// out[rows, n] = x / sqrt(mean(x^2) + eps) * gamma (out may alias x), summing in f64, on the
// calling thread.
void RmsNorm(const float* x, const float* gamma, float* out, int64_t rows, int64_t n, float eps);
// residual[rows, n] += y; y = RmsNorm(residual) * gamma: a pre-norm block's residual add and the
// next norm in one pass, over the pool.
void AddRmsNorm(ThreadPool& pool, float* residual, float* y, const float* gamma, int64_t rows,
                int64_t n, float eps);
// The RmsNorm of each head_dim slice of [num_tokens, heads, head_dim] rows with row stride
// `stride` floats, in place (per-head q/k norm): gamma [head_dim].
void HeadRmsNorm(float* x, const float* gamma, int64_t num_tokens, int64_t heads, int64_t head_dim,
                 int64_t stride, float eps);

// out[0, j] = max over rows r of x[r, j] (and of out[0, j] itself when accumulate).
void MaxRows(const float* x, int64_t rows, int64_t m, float* out, bool accumulate);

// out[r, j] = silu(gate_up[r, j]) * gate_up[r, inter + j] for a fused [rows, 2 * inter] input.
void SiluMul(const float* gate_up, float* out, int64_t rows, int64_t inter);
// out[r, j] = gelu(gate_up[r, j]) * gate_up[r, inter + j] (erf form, or the tanh approximation).
void GeluMul(const float* gate_up, float* out, int64_t rows, int64_t inter, bool tanh_form);
void Tanh(float* x, int64_t n);
void Relu(float* x, int64_t n);
void GeluErf(float* x, int64_t n);
void GeluTanh(float* x, int64_t n);
void Add(float* x, const float* y, int64_t n);  // x += y

// Rotary position embedding, in place on [num_tokens, heads, head_dim] rows with row stride
// `stride` floats; positions[num_tokens]. inv_freq = 1 / theta^(2i / head_dim) in f32, as
// transformers computes it.
void Rotary(float* x, const int32_t* positions, int64_t num_tokens, int64_t heads, int64_t head_dim,
            int64_t stride, double theta, RotaryLayout layout);

// out[r, n] = the pooling of hidden rows [begin, end) (first token, last token, mean in token
// order, or elementwise max), bounds [rows, width] holding (begin, end) non-empty token ranges
// and, with width 3, each range's weight origin (weighted mean weighs token t by t - origin + 1;
// origin <= begin; with width 2 the origin is begin).
void Pool(const float* hidden, const int32_t* bounds, int64_t width, int64_t rows, int64_t n,
          PoolMode mode, float* out);

// Bytes per encoded row of `dims` values.
int64_t EncodedRowBytes(Encoding encoding, int64_t dims);
// Each of `rows` rows of x (row stride x_stride): its first `dims` values, L2-normalized if
// `normalize` (x / max(||x||, 1e-12)), then encoded: f32 / f16 / int8 (clamp(round(tanh(x) ·
// 127))) / sign bits packed most significant first. out holds rows · EncodedRowBytes bytes.
void EncodeRows(const float* x, int64_t x_stride, int64_t rows, int64_t dims, bool normalize,
                Encoding encoding, uint8_t* out);

// scores[r] = dot(x[r], yes) - dot(x[r], no) for x [rows, n], in f32 in index order: a
// reranker's logit("yes") - logit("no") from two rows of the LM head.
void LogitDifference(const float* x, int64_t rows, int64_t n, const float* yes, const float* no,
                     float* scores);

}  // namespace quiver::engine::cpu
