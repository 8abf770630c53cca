// quiver's own ragged flash attention (FA2 style) for bf16 q/k/v/out, head_dim 32, 64 and 128.
//
// One CTA of 4 warps per (query tile of kBlockM = 64 rows, query head); each warp owns 16 query
// rows for the whole kernel. Per key block of kBlockN keys:
//   S = Q·Kᵀ        mma.sync m16n8k16 bf16 → f32, Q fragments held in registers, K via ldmatrix
//   online softmax  f32, in log2 units (scores · scale · log2 e, exp2f), per-row max and sum
//   O += P·V        P re-packed from the S accumulators as bf16 A fragments, V via ldmatrix.trans
// With a sliding window the key blocks outside the tile's window are skipped and the rest masked
// per element; a relative position bias is added per element (both base/attention_plan.h).
// K and V tiles come through cp.async into single-buffered, XOR-swizzled shared memory; the V load
// of block n overlaps S = Q·Kᵀ of block n and the K load of block n + 1 overlaps softmax and P·V.
//
// The grid is (num_seqs · ceil(max_seqlen / kBlockM), num_heads): it depends only on the host
// (num_seqs, max_seqlen), never on the per-sequence lengths, so a captured CUDA graph replays for
// any batch within those bounds. Each CTA reads its sequence's bounds from device cu_seqlens and
// exits at once when its tile starts past the sequence end. (Sequences and tiles share grid.x so
// that num_seqs is not capped by gridDim.y ≤ 65535.) With a device tile list (the CUDA runtime's,
// base/attention_plan.h) the grid is (its bound, num_heads) instead: a graph captured for a bucket
// of T tokens and S sequences launches ceil(T / 64) + S tiles per head, not S · ceil(T / 64).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "engine/base/attention_plan.h"
#include "engine/kernels/cuda/attention.h"

namespace quiver::engine::cuda {
namespace {

constexpr int kNumWarps = 4;
constexpr int kNumThreads = kNumWarps * 32;
constexpr int kRowsPerWarp = 16;  // the M of one m16n8k16 mma
constexpr int kBlockM = kNumWarps * kRowsPerWarp;
static_assert(kBlockM == kAttentionTileRows, "the tile list's rows are this kernel's tile");
constexpr int kChunkElems = 8;  // one 16-byte cp.async / ldmatrix row: 8 bf16

// Key block per head_dim (registers per thread: O is head_dim / 2 floats, S is kBlockN / 2
// floats, the Q fragments head_dim / 4 words; 64 keys fit without spills for every head_dim).
template <int kHeadDim>
constexpr int BlockNFor() {
  return 64;
}

struct VarlenParams {
  const __nv_bfloat16* q;  // [num_tokens, num_heads · head_dim], row stride q_stride
  const __nv_bfloat16* k;  // [num_tokens, num_kv_heads · head_dim], row stride kv_stride
  const __nv_bfloat16* v;  // as k
  __nv_bfloat16* out;      // [num_tokens, num_heads · head_dim], row stride out_stride
  int64_t q_stride;
  int64_t kv_stride;
  int64_t out_stride;
  const int32_t* cu_seqlens;  // device [num_seqs + 1]
  int num_m_blocks;           // ceil(max_seqlen / kBlockM): query tiles per sequence in the grid
  const int32_t* tiles;       // or null: device [grid.x, 2] (sequence, tile), -1 for none
  int heads_per_kv_head;      // num_heads / num_kv_heads
  bool causal;
  float scale_log2;            // scale · log2(e): scores in log2 units for exp2f
  int window;                  // sliding window (base/attention_plan.h), -1 for none
  const float* position_bias;  // or null: device [num_heads, 2 · bias_max_distance + 1]
  int bias_max_distance;
};

// ---- PTX wrappers ---------------------------------------------------------------------------

__device__ __forceinline__ uint32_t SmemAddress(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// 16-byte async copy gmem → smem; with `valid` false nothing is read and the 16 bytes are zeroed
// (src_size 0), so rows past the sequence end become zeros (0 · garbage could be NaN in P·V).
__device__ __forceinline__ void CpAsync16(uint32_t smem_addr, const void* gmem, bool valid) {
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr),
               "l"(__cvta_generic_to_global(gmem)), "r"(src_size)
               : "memory");
}

__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits for every committed group of this thread; a __syncthreads must follow before other
// threads read the data.
__device__ __forceinline__ void CpAsyncWaitAll() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i receives
// matrix i (thread t: row t / 4, columns 2(t % 4), 2(t % 4) + 1).
__device__ __forceinline__ void LdMatrixX4(uint32_t (&frag)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(frag[0]), "=r"(frag[1]), "=r"(frag[2]), "=r"(frag[3])
               : "r"(smem_addr));
}

// As LdMatrixX4, transposed: thread t receives rows 2(t % 4), 2(t % 4) + 1 of column t / 4.
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&frag)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(frag[0]), "=r"(frag[1]), "=r"(frag[2]), "=r"(frag[3])
               : "r"(smem_addr));
}

// acc (16x8 f32) += a (16x16 bf16, row-major) · b (16x8 bf16, column-major).
// Fragments (g = lane / 4, c = lane % 4):
//   a[0] row g, cols 2c..2c+1     a[1] row g+8, cols 2c..2c+1
//   a[2] row g, cols 2c+8..2c+9   a[3] row g+8, cols 2c+8..2c+9
//   b0   rows (k) 2c..2c+1, col (n) g    b1 rows 2c+8..2c+9, col g
//   acc[0..1] row g, cols 2c..2c+1       acc[2..3] row g+8, cols 2c..2c+1
__device__ __forceinline__ void MmaBf16(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as bf16x2, `lo` in the low half (the lower column of an mma fragment).
__device__ __forceinline__ uint32_t PackBf16x2(float lo, float hi) {
  const __nv_bfloat162 packed = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&packed);
}

// ---- Shared-memory layout -------------------------------------------------------------------

// Element offset of 16-byte chunk `chunk` of row `row` in a [rows, kHeadDim] bf16 tile. Every
// ldmatrix phase and every cp.async phase here touches 8 rows r0..r0+7 (r0 % 8 == 0) at one
// logical chunk, or one row's 8 consecutive chunks; the XOR puts those 8 accesses on 8 distinct
// 16-byte bank groups of a 128-byte line:
//   head_dim ≥ 64 (rows of 8 or 16 chunks): chunk ^ (row % 8) permutes the low 3 chunk bits.
//   head_dim 32 (rows of 4 chunks, two rows per line): row % 2 picks the line half and
//   chunk ^ ((row / 2) % 4) permutes the 4 chunks within it.
template <int kHeadDim>
__device__ __forceinline__ int SwizzledOffset(int row, int chunk) {
  constexpr int kChunksPerRow = kHeadDim / kChunkElems;
  static_assert(kChunksPerRow == 4 || kChunksPerRow % 8 == 0, "unsupported head_dim");
  const int physical_chunk = kChunksPerRow == 4 ? (chunk ^ ((row >> 1) & 3)) : (chunk ^ (row & 7));
  return row * kHeadDim + physical_chunk * kChunkElems;
}

// Enqueues the cp.async copies of a [kRows, kHeadDim] tile whose row 0 is `gmem_row0` (rows
// `row_stride` elements apart); rows ≥ valid_rows are zero-filled and not read. Does not commit.
template <int kHeadDim, int kRows>
__device__ __forceinline__ void LoadTileAsync(uint16_t* smem_tile, const __nv_bfloat16* gmem_row0,
                                              int64_t row_stride, int valid_rows) {
  constexpr int kChunksPerRow = kHeadDim / kChunkElems;
  constexpr int kChunks = kRows * kChunksPerRow;
  static_assert(kChunks % kNumThreads == 0, "tile must split evenly over the CTA");
#pragma unroll
  for (int i = 0; i < kChunks / kNumThreads; ++i) {
    const int index = static_cast<int>(threadIdx.x) + i * kNumThreads;
    const int row = index / kChunksPerRow;
    const int chunk = index % kChunksPerRow;
    const bool valid = row < valid_rows;
    // An invalid row reads nothing; row 0 (always inside the sequence) keeps the address sane.
    const __nv_bfloat16* src =
        gmem_row0 + static_cast<int64_t>(valid ? row : 0) * row_stride + chunk * kChunkElems;
    CpAsync16(SmemAddress(smem_tile + SwizzledOffset<kHeadDim>(row, chunk)), src, valid);
  }
}

// ---- The kernel -----------------------------------------------------------------------------

template <int kHeadDim, int kBlockN>
__global__ void __launch_bounds__(kNumThreads)
    VarlenFlashAttentionKernel(const VarlenParams params) {
  constexpr int kQkSteps = kHeadDim / 16;  // k16 steps of Q·Kᵀ over head_dim
  constexpr int kSTiles = kBlockN / 8;     // n8 tiles of S (keys) per warp
  constexpr int kPvSteps = kBlockN / 16;   // k16 steps of P·V over keys
  constexpr int kOTiles = kHeadDim / 8;    // n8 tiles of O (head_dim) per warp
  constexpr int kChunksPerRow = kHeadDim / kChunkElems;
  constexpr float kNegInf = -INFINITY;
  static_assert(kBlockN % 16 == 0 && kHeadDim % 16 == 0, "mma tiles");

  // bf16 bits; Q is reused to stage the output tile.
  __shared__ __align__(128) uint16_t smem_q[kBlockM * kHeadDim];
  __shared__ __align__(128) uint16_t smem_k[kBlockN * kHeadDim];
  __shared__ __align__(128) uint16_t smem_v[kBlockN * kHeadDim];

  // blockIdx.x = seq · num_m_blocks + tile, tiles in reverse so that the heaviest causal tiles
  // (the last of each sequence) start first.
  // With a tile list, blockIdx.x indexes it (the host ordered it heaviest first).
  const int num_m_blocks = params.num_m_blocks;
  const int block = static_cast<int>(blockIdx.x);
  int seq = block / num_m_blocks;
  int m_block = num_m_blocks - 1 - block % num_m_blocks;
  if (params.tiles != nullptr) {
    seq = params.tiles[2 * block];
    m_block = params.tiles[2 * block + 1];
    if (seq < 0) return;  // uniform over the CTA, before any barrier
  }
  const int head = static_cast<int>(blockIdx.y);
  const int kv_head = head / params.heads_per_kv_head;

  const int seq_begin = params.cu_seqlens[seq];
  const int seqlen = params.cu_seqlens[seq + 1] - seq_begin;
  const int m_start = m_block * kBlockM;  // first query row of the tile, within the sequence
  if (m_start >= seqlen) return;          // uniform over the CTA, before any barrier

  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int group = lane / 4;            // g of the mma fragments
  const int thread_in_group = lane % 4;  // c of the mma fragments

  const __nv_bfloat16* q_tile =
      params.q + static_cast<int64_t>(seq_begin + m_start) * params.q_stride + head * kHeadDim;
  const __nv_bfloat16* k_seq =
      params.k + static_cast<int64_t>(seq_begin) * params.kv_stride + kv_head * kHeadDim;
  const __nv_bfloat16* v_seq =
      params.v + static_cast<int64_t>(seq_begin) * params.kv_stride + kv_head * kHeadDim;

  // Causal (q and k of one sequence, no cache): query i sees keys 0..i, so the tile needs keys
  // below m_start + kBlockM only.
  // A sliding window narrows the keys further: the tile's first query sees from
  // m_start - window, its last up to m_start + kBlockM - 1 + window.
  const bool windowed = params.window >= 0;
  const int n_end = params.causal ? min(seqlen, m_start + kBlockM)
                    : windowed    ? min(seqlen, m_start + kBlockM + params.window)
                                  : seqlen;
  const int n_first = windowed ? max(0, m_start - params.window) / kBlockN : 0;
  const int num_n_blocks = (n_end + kBlockN - 1) / kBlockN;  // > n_first: n_end > m_start
  const bool masked = windowed || params.position_bias != nullptr;
  const float* bias_row = params.position_bias != nullptr
                              ? params.position_bias + head * (2 * params.bias_max_distance + 1) +
                                    params.bias_max_distance
                              : nullptr;

  LoadTileAsync<kHeadDim, kBlockM>(smem_q, q_tile, params.q_stride, seqlen - m_start);
  LoadTileAsync<kHeadDim, kBlockN>(
      smem_k, k_seq + static_cast<int64_t>(n_first) * kBlockN * params.kv_stride, params.kv_stride,
      seqlen - n_first * kBlockN);
  CpAsyncCommit();
  CpAsyncWaitAll();
  __syncthreads();

  // Q fragments of this warp's 16 rows, all head_dim: matrices (rows 0-7 | 8-15) × (cols 0-7 |
  // 8-15) of k-step ks, i.e. lane l addresses row l % 16, chunk 2 ks + l / 16.
  uint32_t q_frag[kQkSteps][4];
#pragma unroll
  for (int ks = 0; ks < kQkSteps; ++ks) {
    const int row = warp * kRowsPerWarp + lane % 16;
    const int chunk = ks * 2 + lane / 16;
    LdMatrixX4(q_frag[ks], SmemAddress(smem_q + SwizzledOffset<kHeadDim>(row, chunk)));
  }

  float o_acc[kOTiles][4];
#pragma unroll
  for (int ot = 0; ot < kOTiles; ++ot) {
#pragma unroll
    for (int i = 0; i < 4; ++i) o_acc[ot][i] = 0.0f;
  }
  // Per thread: rows g (index 0) and g + 8 (index 1) of the warp's 16. row_sum holds only this
  // thread's columns until the end (the 4 threads of a row share its max, so their partial sums
  // rescale alike).
  float row_max[2] = {kNegInf, kNegInf};  // log2 units
  float row_sum[2] = {0.0f, 0.0f};
  const int query_row0 = m_start + warp * kRowsPerWarp + group;  // within the sequence

  for (int n_block = n_first; n_block < num_n_blocks; ++n_block) {
    const int n_start = n_block * kBlockN;
    // smem_v is free: every warp passed the barrier after the previous block's P·V.
    LoadTileAsync<kHeadDim, kBlockN>(smem_v,
                                     v_seq + static_cast<int64_t>(n_start) * params.kv_stride,
                                     params.kv_stride, seqlen - n_start);
    CpAsyncCommit();

    // S = Q·Kᵀ. B fragments from K rows (keys) non-transposed: for key pair-tile np, matrices
    // (keys 0-7, cols 0-7), (keys 0-7, cols 8-15), (keys 8-15, cols 0-7), (keys 8-15, cols 8-15)
    // = (b0, b1) of n-tile 2 np, then of n-tile 2 np + 1.
    float s[kSTiles][4];
#pragma unroll
    for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) s[nt][i] = 0.0f;
    }
#pragma unroll
    for (int ks = 0; ks < kQkSteps; ++ks) {
#pragma unroll
      for (int np = 0; np < kSTiles / 2; ++np) {
        const int key_row = np * 16 + lane % 8 + (lane / 16) * 8;
        const int chunk = ks * 2 + (lane / 8) % 2;
        uint32_t k_frag[4];
        LdMatrixX4(k_frag, SmemAddress(smem_k + SwizzledOffset<kHeadDim>(key_row, chunk)));
        MmaBf16(s[2 * np], q_frag[ks], k_frag[0], k_frag[1]);
        MmaBf16(s[2 * np + 1], q_frag[ks], k_frag[2], k_frag[3]);
      }
    }

    // V of this block has landed, and every warp is done reading smem_k: prefetch the next K
    // under the softmax and P·V.
    CpAsyncWaitAll();
    __syncthreads();
    if (n_block + 1 < num_n_blocks) {
      const int next_start = n_start + kBlockN;
      LoadTileAsync<kHeadDim, kBlockN>(smem_k,
                                       k_seq + static_cast<int64_t>(next_start) * params.kv_stride,
                                       params.kv_stride, seqlen - next_start);
    }
    CpAsyncCommit();

    // Scores in log2 units; keys past the sequence end and, when causal, keys after the query
    // get -inf. Only blocks that reach the sequence end or the diagonal need the per-element test.
#pragma unroll
    for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) s[nt][i] *= params.scale_log2;
    }
    const bool needs_mask =
        masked || n_start + kBlockN > seqlen || (params.causal && n_start + kBlockN - 1 > m_start);
    if (needs_mask) {
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = n_start + nt * 8 + thread_in_group * 2 + (i & 1);
          const int query = query_row0 + (i >= 2 ? 8 : 0);
          if (bias_row != nullptr) {
            const int d =
                min(max(key - query, -params.bias_max_distance), params.bias_max_distance);
            s[nt][i] += bias_row[d] * 1.4426950408889634f;  // log2 units
          }
          if (key >= seqlen || (params.causal && key > query) ||
              (windowed && abs(key - query) > params.window)) {
            s[nt][i] = kNegInf;
          }
        }
      }
    }

    // Online softmax, per row h (accumulator elements 2h, 2h + 1).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float block_max = row_max[h];
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
        block_max = fmaxf(block_max, fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));
      }
      // The 4 threads of a quad hold the row's columns.
      block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 1));
      block_max = fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 2));
      // A row whose keys so far are all masked keeps max -inf: subtract 0 instead, so that
      // p = exp2(-inf) = 0 and the correction exp2(-inf - 0) = 0, never (-inf) - (-inf) = NaN.
      const float max_sub = block_max == kNegInf ? 0.0f : block_max;
      const float correction = exp2f(row_max[h] - max_sub);
      row_max[h] = block_max;
      float block_sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kSTiles; ++nt) {
        s[nt][2 * h] = exp2f(s[nt][2 * h] - max_sub);
        s[nt][2 * h + 1] = exp2f(s[nt][2 * h + 1] - max_sub);
        block_sum += s[nt][2 * h] + s[nt][2 * h + 1];
      }
      row_sum[h] = row_sum[h] * correction + block_sum;
#pragma unroll
      for (int ot = 0; ot < kOTiles; ++ot) {
        o_acc[ot][2 * h] *= correction;
        o_acc[ot][2 * h + 1] *= correction;
      }
    }

    // O += P·V. The S accumulators of n-tiles 2 ps, 2 ps + 1 are exactly the A fragment of keys
    // 16 ps..16 ps + 15. B fragments from V rows (keys) transposed: matrices (keys 0-7, dims
    // 0-7), (keys 8-15, dims 0-7), (keys 0-7, dims 8-15), (keys 8-15, dims 8-15) = (b0, b1) of
    // d-tile 2 dp, then of d-tile 2 dp + 1; lane l addresses key 16 ps + l % 16, chunk 2 dp + l
    // / 16.
#pragma unroll
    for (int ps = 0; ps < kPvSteps; ++ps) {
      const uint32_t p_frag[4] = {PackBf16x2(s[2 * ps][0], s[2 * ps][1]),
                                  PackBf16x2(s[2 * ps][2], s[2 * ps][3]),
                                  PackBf16x2(s[2 * ps + 1][0], s[2 * ps + 1][1]),
                                  PackBf16x2(s[2 * ps + 1][2], s[2 * ps + 1][3])};
#pragma unroll
      for (int dp = 0; dp < kOTiles / 2; ++dp) {
        const int key_row = ps * 16 + lane % 16;
        const int chunk = dp * 2 + lane / 16;
        uint32_t v_frag[4];
        LdMatrixX4Trans(v_frag, SmemAddress(smem_v + SwizzledOffset<kHeadDim>(key_row, chunk)));
        MmaBf16(o_acc[2 * dp], p_frag, v_frag[0], v_frag[1]);
        MmaBf16(o_acc[2 * dp + 1], p_frag, v_frag[2], v_frag[3]);
      }
    }

    // The next K has landed, and every warp is done reading smem_v.
    CpAsyncWaitAll();
    __syncthreads();
  }

  // Epilogue: O / row sum as bf16, staged in smem_q (each warp rewrites only the 16 rows it read
  // its Q fragments from), then written as 16-byte chunks for rows inside the sequence.
  float inv_sum[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = row_sum[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    inv_sum[h] = sum > 0.0f ? 1.0f / sum : 0.0f;
  }
  // Orders the staging stores after this warp's Q ldmatrix reads for the compiler too (the
  // ldmatrix asm declares no memory effects); once per CTA, so it costs nothing measurable.
  __syncthreads();
#pragma unroll
  for (int ot = 0; ot < kOTiles; ++ot) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warp * kRowsPerWarp + group + 8 * h;
      // d-tile ot is chunk ot; this thread's two columns start at element 2c of it.
      uint16_t* dst = smem_q + SwizzledOffset<kHeadDim>(row, ot) + thread_in_group * 2;
      *reinterpret_cast<uint32_t*>(dst) =
          PackBf16x2(o_acc[ot][2 * h] * inv_sum[h], o_acc[ot][2 * h + 1] * inv_sum[h]);
    }
  }
  __syncthreads();

  __nv_bfloat16* out_tile =
      params.out + static_cast<int64_t>(seq_begin + m_start) * params.out_stride + head * kHeadDim;
  constexpr int kOutChunks = kBlockM * kChunksPerRow;
  static_assert(kOutChunks % kNumThreads == 0, "output tile must split evenly over the CTA");
#pragma unroll
  for (int i = 0; i < kOutChunks / kNumThreads; ++i) {
    const int index = static_cast<int>(threadIdx.x) + i * kNumThreads;
    const int row = index / kChunksPerRow;
    const int chunk = index % kChunksPerRow;
    if (m_start + row < seqlen) {
      const uint4 value =
          *reinterpret_cast<const uint4*>(smem_q + SwizzledOffset<kHeadDim>(row, chunk));
      *reinterpret_cast<uint4*>(out_tile + static_cast<int64_t>(row) * params.out_stride +
                                chunk * kChunkElems) = value;
    }
  }
}

template <int kHeadDim>
cudaError_t LaunchVarlen(const VarlenParams& params, int64_t num_blocks, int num_heads,
                         cudaStream_t stream) {
  constexpr int kBlockN = BlockNFor<kHeadDim>();
  const dim3 grid(static_cast<unsigned>(num_blocks), static_cast<unsigned>(num_heads));
  VarlenFlashAttentionKernel<kHeadDim, kBlockN><<<grid, kNumThreads, 0, stream>>>(params);
  return cudaGetLastError();
}

bool Aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

bool VarlenFlashAttentionSupports(int head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 128;
}

cudaError_t VarlenFlashAttention(const RaggedAttentionArgs& args, cudaStream_t stream) {
  if (args.dtype != DType::kBF16 || args.out_dtype != DType::kBF16) return cudaErrorInvalidValue;
  if (!VarlenFlashAttentionSupports(args.head_dim)) return cudaErrorInvalidValue;
  if (args.num_heads <= 0 || args.num_kv_heads <= 0 || args.num_heads % args.num_kv_heads != 0 ||
      args.num_heads > 65535) {
    return cudaErrorInvalidValue;
  }
  // Every cp.async and output store moves 16 bytes: row starts must be 16-byte aligned, i.e.
  // base pointers 16-byte aligned and row strides multiples of 8 bf16 (head offsets h · head_dim
  // are multiples of 32 elements).
  if (args.q_stride % kChunkElems != 0 || args.kv_stride % kChunkElems != 0 ||
      args.out_stride % kChunkElems != 0) {
    return cudaErrorInvalidValue;
  }
  if (!Aligned16(args.q) || !Aligned16(args.k) || !Aligned16(args.v) || !Aligned16(args.out)) {
    return cudaErrorInvalidValue;
  }
  if (args.num_tokens < 0 || args.num_seqs < 0 || args.max_seqlen < 0) return cudaErrorInvalidValue;
  if (args.num_tokens == 0 || args.num_seqs == 0 || args.max_seqlen == 0) return cudaSuccess;

  const int64_t num_m_blocks = (args.max_seqlen + kBlockM - 1) / kBlockM;
  if (args.num_seqs > INT_MAX / num_m_blocks) return cudaErrorInvalidValue;  // grid.x as int
  if (args.tiles != nullptr && (args.num_tiles <= 0 || args.num_tiles > INT_MAX / 2)) {
    return cudaErrorInvalidValue;
  }
  const int64_t num_blocks = args.tiles != nullptr ? args.num_tiles : args.num_seqs * num_m_blocks;

  VarlenParams params{};
  params.q = static_cast<const __nv_bfloat16*>(args.q);
  params.k = static_cast<const __nv_bfloat16*>(args.k);
  params.v = static_cast<const __nv_bfloat16*>(args.v);
  params.out = static_cast<__nv_bfloat16*>(args.out);
  params.q_stride = args.q_stride;
  params.kv_stride = args.kv_stride;
  params.out_stride = args.out_stride;
  params.cu_seqlens = args.cu_seqlens;
  params.num_m_blocks = static_cast<int>(num_m_blocks);
  params.tiles = args.tiles;
  params.heads_per_kv_head = args.num_heads / args.num_kv_heads;
  params.causal = args.causal;
  params.scale_log2 = args.scale * 1.4426950408889634f;  // log2(e)
  if (args.window > INT_MAX / 2 || args.bias_max_distance < 0 ||
      args.bias_max_distance > INT_MAX / 4) {
    return cudaErrorInvalidValue;
  }
  params.window = static_cast<int>(args.window < 0 ? -1 : args.window);
  params.position_bias = args.position_bias;
  params.bias_max_distance = static_cast<int>(args.bias_max_distance);

  switch (args.head_dim) {
    case 32:
      return LaunchVarlen<32>(params, num_blocks, args.num_heads, stream);
    case 64:
      return LaunchVarlen<64>(params, num_blocks, args.num_heads, stream);
    case 128:
      return LaunchVarlen<128>(params, num_blocks, args.num_heads, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace quiver::engine::cuda
