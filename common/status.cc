#include "common/status.h"

#include "common/strings.h"

namespace quiver {

absl::Status WithContext(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), StrCat(context, ": ", status.message()));
}

}  // namespace quiver
