// Process-wide logging set-up (spdlog). One line per start, stop and configuration at info
// level; nothing per request above debug, except the access log when asked for.
//
// Two formats, one line per record on stderr:
//   text: 2026-12-04T19:45:43.171 info [quiver] message
//   json: {"timestamp":"2026-12-04T19:45:43.171Z","level":"info","logger":"quiver",
//          "thread":1234,"message":"message"} (UTC; one object per line, valid UTF-8 even where
//          a message carries bytes that are not: those become U+FFFD), for log collectors
//          (Kubernetes, Loki, Elasticsearch) that parse lines without a pattern.
// LogWithFields adds named values to a record: their own keys in JSON, "key=value" after the
// message in text.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace quiver {

enum class LogFormat { kText, kJson };

// "text" or "json"; INVALID_ARGUMENT naming --log-format otherwise.
absl::StatusOr<LogFormat> ParseLogFormat(std::string_view name);

// Level is one of trace, debug, info, warn, error, off; INVALID_ARGUMENT names it otherwise.
absl::Status InitLogging(std::string_view level, LogFormat format = LogFormat::kText);

struct LogField {
  std::string_view key;
  std::variant<std::string_view, int64_t, double> value;
};

// One info record: `message`, then the fields (see above). Cheap when info is disabled.
void LogInfoWithFields(std::string_view message, std::initializer_list<LogField> fields);

// The JSON line (without its newline) of one record, as the json format writes it; for tests.
// `unix_ms` is the record's time in milliseconds since the epoch.
std::string JsonLogLine(int64_t unix_ms, std::string_view level, std::string_view logger,
                        uint64_t thread, std::string_view message,
                        std::initializer_list<LogField> fields = {});

}  // namespace quiver
