// Prometheus metrics: counters, gauges and histograms with fixed buckets, rendered in the text
// exposition format. All operations are thread-safe; observation is lock-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace quiver {

class Counter {
 public:
  void Inc(int64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double v);
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  const std::vector<double>& bounds() const { return bounds_; }
  uint64_t bucket(size_t i) const { return buckets_[i].load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // non-cumulative; +Inf is the last
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0.0};
};

// Owns metrics by name and labels; Render() writes them all. Registration takes a lock,
// observation does not (keep the returned reference).
class MetricsRegistry {
 public:
  Counter& GetCounter(const std::string& name, const std::string& help,
                      const std::string& labels = "");
  Gauge& GetGauge(const std::string& name, const std::string& help, const std::string& labels = "");
  Histogram& GetHistogram(const std::string& name, const std::string& help,
                          std::vector<double> bounds, const std::string& labels = "");
  std::string Render() const;

  // Bucket bounds: `count` values from `start`, each `factor` times the previous.
  static std::vector<double> ExponentialBuckets(double start, double factor, int count);

 private:
  struct Family {
    std::string type, help;
    std::map<std::string, std::unique_ptr<Counter>> counters;
    std::map<std::string, std::unique_ptr<Gauge>> gauges;
    std::map<std::string, std::unique_ptr<Histogram>> histograms;
  };
  Family& GetFamily(const std::string& name, const std::string& type, const std::string& help);
  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

// One label as the exposition format writes it, name="value", with the value's backslashes,
// quotes and newlines escaped: label sets are built from these, never from raw text.
std::string MetricLabel(std::string_view name, std::string_view value);

}  // namespace quiver
