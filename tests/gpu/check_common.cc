#include "tests/gpu/check_common.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "common/json.h"
#include "common/json_writer.h"

namespace quiver::gpu_check {

void Report::Add(Check check) {
  std::printf("  [%s]%s %-58s value=%-12.6g %s %-10.4g%s%s\n", check.ok ? "PASS" : "FAIL",
              check.goal ? "(goal)" : "", check.name.c_str(), check.value, check.compare.c_str(),
              check.limit, check.error.empty() ? "" : "  error: ", check.error.c_str());
  std::fflush(stdout);
  checks_.push_back(std::move(check));
}

void Report::Expect(std::string name, const absl::StatusOr<double>& value, double limit,
                    std::string compare, bool goal, std::string note) {
  Check check;
  check.name = std::move(name);
  check.limit = limit;
  check.compare = std::move(compare);
  check.goal = goal;
  check.note = std::move(note);
  if (value.ok()) {
    check.value = *value;
    check.ok = check.compare == "<=" ? *value <= limit : *value >= limit;  // NaN fails
  } else {
    check.error = value.status().ToString();
  }
  Add(std::move(check));
}

void Report::Error(std::string name, const absl::Status& status) {
  Check check;
  check.name = std::move(name);
  check.error = status.ok() ? "OK status reported as an error" : status.ToString();
  Add(std::move(check));
}

void Report::Metric(std::string key, double value) {
  std::printf("  %s = %.6g\n", key.c_str(), value);
  std::fflush(stdout);
  metrics_.emplace_back(std::move(key), value);
}

std::optional<double> Report::FindMetric(std::string_view key) const {
  for (const auto& [k, v] : metrics_) {
    if (k == key) return v;
  }
  return std::nullopt;
}

void Report::Section(std::string key, std::string json) {
  sections_.emplace_back(std::move(key), std::move(json));
}

void Report::Fail(const absl::Status& status) {
  std::printf("  stage error: %s\n", status.ToString().c_str());
  if (!error_.empty()) error_ += "; ";
  error_ += status.ToString();
}

bool Report::ok() const {
  if (!error_.empty()) return false;
  for (const Check& check : checks_) {
    if (!check.goal && !check.ok) return false;
  }
  return true;
}

int Report::failed_checks() const {
  int failed = 0;
  for (const Check& check : checks_) failed += !check.goal && !check.ok;
  return failed;
}

std::string Report::ToJson(const DeviceInfo* device, double elapsed_s, bool complete) const {
  JsonWriter w;
  w.BeginObject();
  w.Key("stage").String(stage_);
  w.Key("ok").Bool(ok() && complete);
  w.Key("complete").Bool(complete);
  w.Key("quick").Bool(quick_);
  w.Key("elapsed_s").Double(elapsed_s);
  w.Key("device");
  if (device != nullptr) {
    w.BeginObject();
    w.Key("name").String(device->name);
    w.Key("sm_count").Int(device->sm_count);
    w.Key("compute_capability").String(absl::StrCat(device->cc_major, ".", device->cc_minor));
    w.Key("total_mib").Double(static_cast<double>(device->total_bytes) / (1 << 20));
    w.Key("driver_version").Int(device->driver_version);
    w.Key("runtime_version").Int(device->runtime_version);
    w.EndObject();
  } else {
    w.Null();
  }
  w.Key("error");
  if (error_.empty()) {
    w.Null();
  } else {
    w.String(error_);
  }
  w.Key("checks_total").Int(static_cast<int64_t>(checks_.size()));
  w.Key("checks_failed").Int(failed_checks());
  w.Key("metrics").BeginObject();
  for (const auto& [key, value] : metrics_) w.Key(key).Double(value);
  w.EndObject();
  w.Key("checks").BeginArray();
  for (const Check& check : checks_) {
    w.BeginObject();
    w.Key("name").String(check.name);
    w.Key("ok").Bool(check.ok);
    w.Key("value").Double(check.value);
    w.Key("limit").Double(check.limit);
    w.Key("compare").String(check.compare);
    w.Key("goal").Bool(check.goal);
    if (!check.error.empty()) w.Key("error").String(check.error);
    if (!check.note.empty()) w.Key("note").String(check.note);
    w.EndObject();
  }
  w.EndArray();
  for (const auto& [key, json] : sections_) w.Key(key).Raw(json);
  w.EndObject();
  return std::move(w).Take();
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot open ", path, " for writing"));
  out << text << '\n';
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("writing ", path, " failed"));
  return absl::OkStatus();
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<float> values) {
  return Median(std::vector<double>(values.begin(), values.end()));
}

double Median(std::vector<double> values) {
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

std::optional<double> ReadGemmCeiling(std::string path, const std::string& json_path) {
  if (path.empty()) {
    const size_t slash = json_path.rfind('/');
    path = slash == std::string::npos ? "." : json_path.substr(0, slash);
  }
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) path += "/ceilings.json";
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return std::nullopt;
  absl::StatusOr<JsonValue> doc = JsonValue::Parse(*text);
  if (!doc.ok()) return std::nullopt;
  const JsonValue* metrics = doc->Find("metrics");
  if (metrics == nullptr) return std::nullopt;
  const JsonValue* tflops = metrics->Find("gemm_tflops");
  if (tflops == nullptr || !tflops->is_number() || !(tflops->as_double() > 0)) return std::nullopt;
  std::printf("  gemm ceiling %.1f TFLOP/s from %s\n", tflops->as_double(), path.c_str());
  return tflops->as_double();
}

}  // namespace quiver::gpu_check
