#include "common/logging.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>
#include <string>

#include "common/strings.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace quiver {
namespace {

// The fields of the record being logged on this thread (LogInfoWithFields), read by the JSON
// formatter: the logger is synchronous, so the record is formatted before the call returns.
thread_local const std::initializer_list<LogField>* current_fields = nullptr;

// `s` as the inside of a JSON string: escaped as AppendJsonEscaped does, and every byte that
// does not start a well-formed UTF-8 sequence written as U+FFFD, so that the line always parses.
void AppendJsonText(std::string& out, std::string_view s) { AppendJsonEscaped(out, ValidUtf8(s)); }

void AppendJsonValue(std::string& out, const LogField& field) {
  if (const auto* text = std::get_if<std::string_view>(&field.value)) {
    out += '"';
    AppendJsonText(out, *text);
    out += '"';
  } else if (const auto* integer = std::get_if<int64_t>(&field.value)) {
    fmt::format_to(std::back_inserter(out), "{}", *integer);
  } else {
    const double d = std::get<double>(field.value);
    if (std::isfinite(d)) {
      fmt::format_to(std::back_inserter(out), "{}", d);
    } else {
      out += "null";
    }
  }
}

void AppendJsonLine(std::string& out, int64_t unix_ms, std::string_view level,
                    std::string_view logger, uint64_t thread, std::string_view message,
                    const std::initializer_list<LogField>* fields) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  fmt::format_to(std::back_inserter(out),
                 "{{\"timestamp\":\"{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z\",\"level\":\"",
                 utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min,
                 utc.tm_sec, static_cast<int>(unix_ms % 1000));
  AppendJsonText(out, level);
  out += "\",\"logger\":\"";
  AppendJsonText(out, logger);
  fmt::format_to(std::back_inserter(out), "\",\"thread\":{},\"message\":\"", thread);
  AppendJsonText(out, message);
  out += '"';
  if (fields != nullptr) {
    for (const LogField& field : *fields) {
      out += ",\"";
      AppendJsonText(out, field.key);
      out += "\":";
      AppendJsonValue(out, field);
    }
  }
  out += '}';
}

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const int64_t unix_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count();
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    std::string line;
    line.reserve(160 + msg.payload.size());
    AppendJsonLine(line, unix_ms, std::string_view(level.data(), level.size()),
                   std::string_view(msg.logger_name.data(), msg.logger_name.size()), msg.thread_id,
                   std::string_view(msg.payload.data(), msg.payload.size()), current_fields);
    line += '\n';
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

LogFormat active_format = LogFormat::kText;

// A text field's value as logfmt writes it: bare where it is one plain word, else quoted.
void AppendTextValue(std::string& out, const LogField& field) {
  const auto* text = std::get_if<std::string_view>(&field.value);
  if (text == nullptr) {
    std::string json;
    AppendJsonValue(json, field);
    out += json;
    return;
  }
  bool bare = !text->empty();
  for (char c : *text) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20) {
      bare = false;
      break;
    }
  }
  if (bare) {
    out += *text;
    return;
  }
  out += '"';
  AppendJsonEscaped(out, *text);
  out += '"';
}

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      StrCat("--log-format: unknown format '", name, "' (text or json)"));
}

absl::Status InitLogging(std::string_view level, LogFormat format) {
  spdlog::level::level_enum parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        StrCat("--log-level: unknown level '", level, "' (trace, debug, info, warn, error, off)"));
  }
  std::shared_ptr<spdlog::logger> logger = spdlog::get("quiver");
  if (logger == nullptr) logger = spdlog::stderr_color_mt("quiver");
  spdlog::set_default_logger(logger);
  if (format == LogFormat::kJson) {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_formatter(
        std::make_unique<spdlog::pattern_formatter>("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v"));
  }
  active_format = format;
  spdlog::set_level(parsed);
  spdlog::flush_on(spdlog::level::info);
  return absl::OkStatus();
}

void LogInfoWithFields(std::string_view message, std::initializer_list<LogField> fields) {
  if (!spdlog::should_log(spdlog::level::info)) return;
  if (active_format == LogFormat::kJson) {
    current_fields = &fields;
    spdlog::info("{}", message);
    current_fields = nullptr;
    return;
  }
  std::string line(message);
  for (const LogField& field : fields) {
    line += ' ';
    line += field.key;
    line += '=';
    AppendTextValue(line, field);
  }
  spdlog::info("{}", line);
}

std::string JsonLogLine(int64_t unix_ms, std::string_view level, std::string_view logger,
                        uint64_t thread, std::string_view message,
                        std::initializer_list<LogField> fields) {
  std::string out;
  AppendJsonLine(out, unix_ms, level, logger, thread, message, &fields);
  return out;
}

}  // namespace quiver
