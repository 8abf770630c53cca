// What every stage of quiver_gpu_check shares: the report a stage fills (checks with their values
// and limits, metrics, raw JSON sections) and writes as its JSON file, the options of the command
// line, seeded random numbers, medians and percentiles, and the GEMM ceiling a ceilings report
// measured. Host code only: no CUDA header, so the engine stages (engine_stages.cc) use it too.
// Not thread-safe: a stage fills its report from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace quiver::gpu_check {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// One check: passes when value <= limit (compare "<=") or value >= limit (">="). A goal check is
// a performance target: recorded with its ok, never failing the stage.
struct Check {
  std::string name;
  bool ok = false;
  double value = kNaN;
  double limit = kNaN;
  std::string compare = "<=";
  bool goal = false;
  std::string error;  // why the check could not run (an absl::Status message); empty if it ran
  std::string note;
};

struct DeviceInfo {
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t total_bytes = 0, free_bytes = 0;
  int driver_version = 0, runtime_version = 0;
};

class Report {
 public:
  Report(std::string stage, bool quick) : stage_(std::move(stage)), quick_(quick) {}

  void Add(Check check);
  // Records `value` (or the error that kept it from being measured) against `limit`.
  void Expect(std::string name, const absl::StatusOr<double>& value, double limit,
              std::string compare = "<=", bool goal = false, std::string note = "");
  // A check that could not run: failed, with the status's message.
  void Error(std::string name, const absl::Status& status);
  void Metric(std::string key, double value);
  std::optional<double> FindMetric(std::string_view key) const;
  // A JSON value (already serialized) stored under `key`.
  void Section(std::string key, std::string json);
  // A stage-level failure (the stage could not go on); the report is not ok.
  void Fail(const absl::Status& status);

  bool ok() const;
  int failed_checks() const;

  // {"stage", "ok", "complete", "quick", "elapsed_s", "device", "error", "checks_total",
  // "checks_failed", "metrics", "checks", sections...}. `complete` false marks a report written
  // part-way (a checkpoint): its "ok" is false until the stage finished.
  std::string ToJson(const DeviceInfo* device, double elapsed_s, bool complete = true) const;

 private:
  std::string stage_;
  bool quick_;
  std::string error_;
  std::vector<Check> checks_;
  std::vector<std::pair<std::string, double>> metrics_;
  std::vector<std::pair<std::string, std::string>> sections_;
};

// The command line, as every stage sees it.
struct Options {
  bool probe = false;
  std::string stage;
  std::string json_path;
  std::string summary_dir;
  std::string ceilings_path;                       // a ceilings.json, or the folder holding one
  std::string fixtures_dir = "tests/fixtures";     // the tree's reference fixtures
  std::string work_dir = "/tmp/quiver-gpu-check";  // generated model folders, peer_input.json
  bool quick = false;
  // Set by the stage runner: writes the report so far as a partial JSON (long stages call it
  // between their parts, so that a stage stopped by its time limit still leaves what it did).
  std::function<void()> checkpoint;
};

absl::Status WriteTextFile(const std::string& path, const std::string& text);

double SecondsSince(std::chrono::steady_clock::time_point start);

// Deterministic pseudo-random numbers (splitmix64): fast enough for the GiB-sized inputs.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(Next() >> 11) * 0x1.0p-53;
  }
  float UniformF(float lo, float hi) { return static_cast<float>(Uniform(lo, hi)); }
  int64_t Int(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  uint64_t state_;
};

// NaN for no values.
double Median(std::vector<float> values);
double Median(std::vector<double> values);
// The nearest-rank percentile (p in [0, 100]); NaN for no values.
double Percentile(std::vector<double> values, double p);

// gemm_tflops from a ceilings report: `path` is the file or its folder; empty: the folder of
// `json_path`. nullopt when there is none (or it holds no positive number).
std::optional<double> ReadGemmCeiling(std::string path, const std::string& json_path);

}  // namespace quiver::gpu_check
