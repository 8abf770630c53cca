// Memory-mapped safetensors checkpoints: one file, or shards listed by
// model.safetensors.index.json. Headers are validated completely at open (dtype, shape,
// offsets inside the file, byte size = element count x dtype size), so a truncated or corrupt
// file fails here with the tensor's name, never later as a wild read.
//
// Immutable after Open; safe to read from many threads. Tensor data pointers stay valid for the
// lifetime of the WeightStore that owns the maps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file.h"
#include "engine/base/dtype.h"

namespace quiver::engine {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the owning file's map; little-endian
  size_t size_bytes = 0;
  std::string file;  // the shard it lives in, for messages

  int64_t num_elements() const;
};

// "[30522, 384]" for messages.
std::string ShapeString(const std::vector<int64_t>& shape);

class WeightStore {
 public:
  // Opens `dir`/model.safetensors, or the shards named by `dir`/model.safetensors.index.json.
  // NOT_FOUND when neither exists; INVALID_ARGUMENT / DATA_LOSS naming the file and tensor when
  // a header is malformed or a file is shorter than its header says.
  static absl::StatusOr<WeightStore> OpenFolder(const std::string& dir);
  // Opens one safetensors file.
  static absl::StatusOr<WeightStore> OpenFile(const std::string& path);

  const TensorInfo* Find(std::string_view name) const;
  const std::map<std::string, TensorInfo, std::less<>>& tensors() const { return tensors_; }
  size_t weights_bytes() const;
  // The files' pages read so far given back (MappedFile::DropResidentPages): once the weights
  // are packed, quantized or uploaded, only the tensors used as views of the map (embedding
  // tables, norms) are read again, and only their pages return.
  void DropResidentPages() const;

 private:
  absl::Status AddFile(const std::string& path);

  std::vector<MappedFile> files_;
  std::map<std::string, TensorInfo, std::less<>> tensors_;
};

}  // namespace quiver::engine
