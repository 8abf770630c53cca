// The CUDA-graph cache's policy, device-independent so that it is unit-tested on the CPU and
// drives the CUDA runtime (runtime/cuda_runtime.h) unchanged. A key is (token bucket, sequence
// bucket, attention backend): everything a captured forward pass bakes in (grid sizes, GEMM
// shapes, the attention kernel); per-batch values reach the kernels through device buffers.
//
// Lazy: a key's first use runs eagerly (which also chooses the cuBLASLt algorithms and loads the
// kernels' modules), its second captures and launches the graph, later ones replay it. At most
// `max_graphs` graphs are held; storing one more evicts the least recently used (its memory is
// given back by the destroy callback), and an evicted key starts over at "seen once": its next
// use captures again. A key whose capture failed runs eagerly for good.
//
// Graphs are opaque handles here (the runtime's cudaGraphExec_t); the cache calls `destroy` for
// each one it drops, also at destruction. Not thread-safe: owned by the engine's compute thread.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <string>

#include "engine/graph_bucket.h"

namespace quiver::engine {

struct GraphKey {
  GraphBucket bucket;
  std::string attention;  // the backend's name: its kernels are captured
  auto operator<=>(const GraphKey&) const = default;
};

enum class GraphMode {
  kOff,   // every batch eager (debugging, or to compare)
  kLazy,  // eager on a key's first use, capture on the second, replay after
};

struct GraphStats {
  int64_t held = 0;          // graphs in the cache now
  int64_t captures = 0;      // graphs captured (including ones evicted since)
  int64_t replays = 0;       // launches of a graph captured earlier
  int64_t eager_runs = 0;    // batches run without a graph (first uses, off, too large, failed)
  int64_t evictions = 0;     // graphs dropped for the cap
  int64_t failed = 0;        // captures that failed (their keys stay eager)
  double capture_ms = 0.0;   // total time spent capturing and instantiating
  int64_t memory_bytes = 0;  // device memory the held graphs took when they were made
};

class GraphCache {
 public:
  using Handle = void*;
  using Destroy = std::function<void(Handle)>;

  enum class Action {
    kEager,    // run without a graph
    kCapture,  // capture this batch, then Store (or CaptureFailed), then launch it
    kReplay,   // launch Find(key)
  };

  GraphCache(GraphMode mode, int64_t max_graphs, Destroy destroy);
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // What to do with the next batch of `key`; `capturable` is false where the batch may not be
  // captured (above --graph-max-tokens, or an attention backend that plans per batch): eager.
  Action Next(const GraphKey& key, bool capturable = true);
  // After kCapture: the instantiated graph, the device memory it took and the time it cost.
  // Evicts the least recently used graphs beyond the cap.
  void Store(const GraphKey& key, Handle graph, int64_t memory_bytes, double capture_ms);
  // After kCapture: the capture failed; the key runs eagerly from now on.
  void CaptureFailed(const GraphKey& key);
  // After kReplay: the key's graph (marked most recently used).
  Handle Find(const GraphKey& key);

  const GraphStats& stats() const { return stats_; }
  GraphMode mode() const { return mode_; }
  int64_t max_graphs() const { return max_graphs_; }

 private:
  struct Entry {
    int64_t uses = 0;
    bool failed = false;
    Handle graph = nullptr;
    int64_t memory_bytes = 0;
    std::list<GraphKey>::iterator lru;  // valid while graph != nullptr
  };
  void Evict(Entry& entry);

  GraphMode mode_;
  int64_t max_graphs_;
  Destroy destroy_;
  std::map<GraphKey, Entry> entries_;
  std::list<GraphKey> lru_;  // most recently used first; the keys that hold a graph
  GraphStats stats_;
};

}  // namespace quiver::engine
