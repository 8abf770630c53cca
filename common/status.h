// Errors are values: absl::Status / absl::StatusOr cross every library boundary, never
// exceptions. These macros keep the early returns short.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/strings.h"

#define QUIVER_CONCAT_INNER_(a, b) a##b
#define QUIVER_CONCAT_(a, b) QUIVER_CONCAT_INNER_(a, b)

// Returns from the current function when `expr` (an absl::Status) is not OK.
#define QUIVER_RETURN_IF_ERROR(expr)              \
  do {                                            \
    if (::absl::Status _st = (expr); !_st.ok()) { \
      return _st;                                 \
    }                                             \
  } while (0)

// `lhs = value of expr` where expr is an absl::StatusOr<T>; returns its status on error.
#define QUIVER_ASSIGN_OR_RETURN(lhs, expr) \
  QUIVER_ASSIGN_OR_RETURN_IMPL_(QUIVER_CONCAT_(_statusor_, __LINE__), lhs, expr)
#define QUIVER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

namespace quiver {

// The same status with `context: ` put before its message (e.g. the file it came from).
absl::Status WithContext(const absl::Status& status, std::string_view context);

}  // namespace quiver
