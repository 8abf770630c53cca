#include "common/metrics.h"

#include "fmt/format.h"

namespace quiver {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  double current = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(current, current + v, std::memory_order_relaxed)) {
  }
}

std::vector<double> MetricsRegistry::ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i, start *= factor) out.push_back(start);
  return out;
}

MetricsRegistry::Family& MetricsRegistry::GetFamily(const std::string& name,
                                                    const std::string& type,
                                                    const std::string& help) {
  Family& f = families_[name];
  f.type = type;
  f.help = help;
  return f;
}

Counter& MetricsRegistry::GetCounter(const std::string& name, const std::string& help,
                                     const std::string& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = GetFamily(name, "counter", help).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& MetricsRegistry::GetGauge(const std::string& name, const std::string& help,
                                 const std::string& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = GetFamily(name, "gauge", help).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& MetricsRegistry::GetHistogram(const std::string& name, const std::string& help,
                                         std::vector<double> bounds, const std::string& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = GetFamily(name, "histogram", help).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(std::move(bounds));
  return *slot;
}

std::string MetricsRegistry::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  auto braces = [](const std::string& labels, const std::string& extra = "") {
    std::string all = labels;
    if (!extra.empty()) all += (all.empty() ? "" : ",") + extra;
    return all.empty() ? std::string() : "{" + all + "}";
  };
  for (const auto& [name, f] : families_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, f.help, name, f.type);
    for (const auto& [labels, c] : f.counters) {
      out += fmt::format("{}{} {}\n", name, braces(labels), c->value());
    }
    for (const auto& [labels, g] : f.gauges) {
      out += fmt::format("{}{} {}\n", name, braces(labels), g->value());
    }
    for (const auto& [labels, h] : f.histograms) {
      uint64_t cumulative = 0;
      for (size_t i = 0; i < h->bounds().size(); ++i) {
        cumulative += h->bucket(i);
        out += fmt::format("{}_bucket{} {}\n", name,
                           braces(labels, fmt::format("le=\"{}\"", h->bounds()[i])), cumulative);
      }
      cumulative += h->bucket(h->bounds().size());
      out += fmt::format("{}_bucket{} {}\n", name, braces(labels, "le=\"+Inf\""), cumulative);
      out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, braces(labels), h->sum(), name,
                         braces(labels), h->count());
    }
  }
  return out;
}

std::string MetricLabel(std::string_view name, std::string_view value) {
  std::string out(name);
  out += "=\"";
  for (const char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  out += '"';
  return out;
}

}  // namespace quiver
