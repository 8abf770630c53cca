#include "common/logging.h"

#include <string>

#include "common/strings.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace quiver {

absl::Status InitLogging(std::string_view level) {
  spdlog::level::level_enum parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(StrCat(
        "--log-level: unknown level '", level, "' (trace, debug, info, warn, error, off)"));
  }
  auto logger = spdlog::stderr_color_mt("quiver");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
  spdlog::set_level(parsed);
  spdlog::flush_on(spdlog::level::info);
  return absl::OkStatus();
}

}  // namespace quiver
