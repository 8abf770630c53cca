// The engine's names for common/half.h's conversions.
#pragma once

#include "common/half.h"

namespace quiver::engine {

using ::quiver::Bf16ToFloat;
using ::quiver::FloatToBf16;
using ::quiver::FloatToHalf;
using ::quiver::HalfToFloat;

}  // namespace quiver::engine
