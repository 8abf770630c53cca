#include "engine/runtime/fidelity.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/strings.h"

namespace quiver::engine {
namespace {

std::vector<float> Floats(const EngineOutput& out) {
  std::vector<float> v(out.data.size() / sizeof(float));
  std::memcpy(v.data(), out.data.data(), v.size() * sizeof(float));
  return v;
}

double Cosine(const float* a, const float* b, int64_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < n; ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  if (aa == 0 && bb == 0) return 1.0;
  if (aa == 0 || bb == 0) return 0.0;
  return ab / std::sqrt(aa * bb);
}

}  // namespace

FidelityResult CompareForFidelity(const EngineOutput& device, const EngineOutput& reference,
                                  bool scores, double min_cosine) {
  FidelityResult r;
  if (device.output_type != OutputType::kF32 || reference.output_type != OutputType::kF32 ||
      device.num_seqs != reference.num_seqs || device.dimensions != reference.dimensions ||
      device.data.size() != reference.data.size() || device.num_seqs <= 0) {
    r.message =
        StrCat("the outputs differ in shape: ", device.num_seqs, " x ", device.dimensions,
               " against the reference's ", reference.num_seqs, " x ", reference.dimensions);
    return r;
  }
  const std::vector<float> a = Floats(device), b = Floats(reference);
  r.rows = device.num_seqs;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    // NaN compares false: a NaN anywhere makes the difference infinite.
    r.max_abs_diff = d >= 0 ? std::max(r.max_abs_diff, d) : INFINITY;
  }
  if (scores) {
    r.min_cosine = Cosine(a.data(), b.data(), static_cast<int64_t>(a.size()));
  } else {
    r.min_cosine = 2.0;
    const int64_t n = device.dimensions;
    for (int64_t row = 0; row < r.rows; ++row) {
      const double c = Cosine(a.data() + row * n, b.data() + row * n, n);
      if (std::isnan(c) || c < r.min_cosine) {  // the first NaN is the worst and stays
        r.min_cosine = c;
        r.worst_row = row;
        if (std::isnan(c)) break;
      }
    }
  }
  r.ok = r.min_cosine >= min_cosine && std::isfinite(r.max_abs_diff);
  r.message = fmt::format(
      "{} {} against the CPU f32 engine: min cosine {:.6f}{} (bound {}), max |diff| {:.3g}: {}",
      r.rows, scores ? "scored rows" : "embeddings", r.min_cosine,
      r.worst_row >= 0 ? StrCat(" at row ", r.worst_row) : std::string(), min_cosine,
      r.max_abs_diff, r.ok ? "within" : "OUTSIDE the bound");
  return r;
}

}  // namespace quiver::engine
