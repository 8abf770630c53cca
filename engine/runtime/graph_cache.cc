#include "engine/runtime/graph_cache.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace quiver::engine {

GraphCache::GraphCache(GraphMode mode, int64_t max_graphs, Destroy destroy)
    : mode_(mode), max_graphs_(std::max<int64_t>(0, max_graphs)), destroy_(std::move(destroy)) {}

GraphCache::~GraphCache() {
  for (auto& [key, entry] : entries_) {
    if (entry.graph != nullptr && destroy_) destroy_(entry.graph);
  }
}

GraphCache::Action GraphCache::Next(const GraphKey& key, bool capturable) {
  if (mode_ == GraphMode::kOff || max_graphs_ == 0 || !capturable) {
    ++stats_.eager_runs;
    return Action::kEager;
  }
  Entry& entry = entries_[key];
  if (entry.graph != nullptr) {
    ++stats_.replays;
    return Action::kReplay;
  }
  if (entry.failed || entry.uses++ == 0) {
    ++stats_.eager_runs;
    return Action::kEager;
  }
  return Action::kCapture;
}

void GraphCache::Store(const GraphKey& key, Handle graph, int64_t memory_bytes, double capture_ms) {
  Entry& entry = entries_[key];
  if (entry.graph != nullptr) throw std::logic_error("GraphCache::Store: the key holds a graph");
  ++stats_.captures;
  stats_.capture_ms += capture_ms;
  entry.graph = graph;
  entry.memory_bytes = memory_bytes;
  lru_.push_front(key);
  entry.lru = lru_.begin();
  ++stats_.held;
  stats_.memory_bytes += memory_bytes;
  while (stats_.held > max_graphs_) {
    const GraphKey oldest = lru_.back();
    Evict(entries_.at(oldest));
    ++stats_.evictions;
  }
}

void GraphCache::CaptureFailed(const GraphKey& key) {
  Entry& entry = entries_[key];
  entry.failed = true;
  ++stats_.failed;
  ++stats_.eager_runs;  // the batch runs eagerly after all
}

GraphCache::Handle GraphCache::Find(const GraphKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.graph == nullptr) {
    throw std::logic_error("GraphCache::Find: the key holds no graph");
  }
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.graph;
}

void GraphCache::Evict(Entry& entry) {
  lru_.erase(entry.lru);
  if (destroy_) destroy_(entry.graph);
  entry.graph = nullptr;
  stats_.memory_bytes -= entry.memory_bytes;
  entry.memory_bytes = 0;
  entry.uses = 1;  // seen once: the next use captures again
  --stats_.held;
}

}  // namespace quiver::engine
