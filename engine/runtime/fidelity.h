// The fidelity gate's decision: a device engine's answers for a fixed set of inputs against the
// CPU f32 engine's, row by row. Embeddings compare by cosine per row; scores (one or a few per
// row, where a cosine of one number says nothing) compare as one vector over all rows, and by
// their largest absolute difference. The worker refuses readiness when the smallest cosine is
// below the bound (0.999: the 0.1% divergence the design allows a bf16 GPU against f32).
#pragma once

#include <cstdint>
#include <string>

#include "engine/batch.h"

namespace quiver::engine {

struct FidelityResult {
  bool ok = false;
  int64_t rows = 0;
  double min_cosine = 0.0;  // over rows (embeddings) or the whole score vector
  int64_t worst_row = -1;   // the row of min_cosine (embeddings), else -1
  double max_abs_diff = 0.0;
  std::string message;  // one line with the numbers, for the log
};

// Both outputs kF32 with the same shape (else not ok, saying why). A row of zeros on one side
// and not the other has cosine 0; two zero rows count as equal.
FidelityResult CompareForFidelity(const EngineOutput& device, const EngineOutput& reference,
                                  bool scores, double min_cosine = 0.999);

}  // namespace quiver::engine
