#include "engine/loader/safetensors.h"

#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include "common/json.h"
#include "common/status.h"
#include "common/strings.h"

namespace quiver::engine {
namespace {

// A header larger than this is not a real checkpoint's (the largest are a few MB).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

absl::StatusOr<DType> ParseDType(std::string_view name) {
  if (std::optional<DType> dtype = DTypeFromName(name)) return *dtype;
  return absl::InvalidArgumentError(StrCat("unsupported dtype '", name, "'"));
}

absl::StatusOr<TensorInfo> ParseTensor(const std::string& name, const JsonValue& entry,
                                       const uint8_t* data, uint64_t data_bytes) {
  if (!entry.is_object()) return absl::InvalidArgumentError("entry is not an object");
  TensorInfo info;
  info.name = name;
  QUIVER_ASSIGN_OR_RETURN(std::string dtype_name, JsonString(entry, "dtype"));
  QUIVER_ASSIGN_OR_RETURN(info.dtype, ParseDType(dtype_name));
  const JsonValue* shape = entry.Find("shape");
  if (shape == nullptr) return absl::InvalidArgumentError("missing field 'shape'");
  QUIVER_ASSIGN_OR_RETURN(info.shape, JsonIntArray(*shape, "shape"));
  uint64_t elements = 1;
  for (int64_t dim : info.shape) {
    if (dim < 0) return absl::InvalidArgumentError("negative dimension in 'shape'");
    if (dim != 0 && elements > (1ull << 48) / static_cast<uint64_t>(dim)) {
      return absl::InvalidArgumentError("shape too large");
    }
    elements *= static_cast<uint64_t>(dim);
  }
  const JsonValue* offsets_json = entry.Find("data_offsets");
  if (offsets_json == nullptr) return absl::InvalidArgumentError("missing field 'data_offsets'");
  QUIVER_ASSIGN_OR_RETURN(std::vector<int64_t> offsets,
                          JsonIntArray(*offsets_json, "data_offsets"));
  if (offsets.size() != 2 || offsets[0] < 0 || offsets[1] < offsets[0]) {
    return absl::InvalidArgumentError("'data_offsets' must be [begin, end] with begin <= end");
  }
  uint64_t begin = static_cast<uint64_t>(offsets[0]);
  uint64_t end = static_cast<uint64_t>(offsets[1]);
  uint64_t expected = elements * DTypeSizeBytes(info.dtype);
  if (end - begin != expected) {
    return absl::InvalidArgumentError(StrCat("data_offsets span ", end - begin, " bytes but ",
                                             dtype_name, " ", ShapeString(info.shape), " needs ",
                                             expected));
  }
  if (end > data_bytes) {
    return absl::DataLossError(StrCat("data ends at byte ", end,
                                      " of the data section but "
                                      "the file holds only ",
                                      data_bytes, " (truncated file?)"));
  }
  info.data = data + begin;
  info.size_bytes = expected;
  return info;
}

}  // namespace

int64_t TensorInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

absl::Status WeightStore::AddFile(const std::string& path) {
  QUIVER_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  if (file.size_bytes() < 8) {
    return absl::DataLossError(
        StrCat(path, ": ", file.size_bytes(), " bytes, too short for a safetensors file"));
  }
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file.data(), 8);  // little-endian u64, as on every host we build for
  if (header_bytes > kMaxHeaderBytes || header_bytes > file.size_bytes() - 8) {
    return absl::DataLossError(StrCat(path, ": header length ", header_bytes,
                                      " does not fit in the file's ", file.size_bytes(),
                                      " bytes (truncated or not safetensors)"));
  }
  std::string_view header_text(reinterpret_cast<const char*>(file.data()) + 8, header_bytes);
  absl::StatusOr<JsonValue> header = JsonValue::Parse(header_text);
  if (!header.ok()) return WithContext(header.status(), StrCat(path, ": header"));
  if (!header->is_object()) {
    return absl::InvalidArgumentError(StrCat(path, ": header is not a JSON object"));
  }
  const uint8_t* data = file.data() + 8 + header_bytes;
  uint64_t data_bytes = file.size_bytes() - 8 - header_bytes;
  for (const auto& [name, entry] : header->members()) {
    if (name == "__metadata__") continue;
    absl::StatusOr<TensorInfo> info = ParseTensor(name, entry, data, data_bytes);
    if (!info.ok()) return WithContext(info.status(), StrCat(path, ": tensor '", name, "'"));
    info->file = path;
    if (!tensors_.emplace(name, *std::move(info)).second) {
      return absl::InvalidArgumentError(
          StrCat(path, ": tensor '", name, "' appears in more than one shard"));
    }
  }
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

absl::StatusOr<WeightStore> WeightStore::OpenFile(const std::string& path) {
  WeightStore store;
  QUIVER_RETURN_IF_ERROR(store.AddFile(path));
  return store;
}

absl::StatusOr<WeightStore> WeightStore::OpenFolder(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path single = fs::path(dir) / "model.safetensors";
  fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single)) return OpenFile(single.string());
  if (!fs::exists(index)) {
    return absl::NotFoundError(
        StrCat(dir, ": no model.safetensors and no ", "model.safetensors.index.json"));
  }
  QUIVER_ASSIGN_OR_RETURN(std::string text, ReadFile(index.string()));
  absl::StatusOr<JsonValue> json = JsonValue::Parse(text);
  if (!json.ok()) return WithContext(json.status(), index.string());
  const JsonValue* map = json->Find("weight_map");
  if (map == nullptr || !map->is_object()) {
    return absl::InvalidArgumentError(
        StrCat(index.string(), ": missing object field 'weight_map'"));
  }
  std::set<std::string> shards;
  for (const auto& [name, shard] : map->members()) {
    if (!shard.is_string() || shard.as_string().find('/') != std::string::npos) {
      return absl::InvalidArgumentError(
          StrCat(index.string(), ": weight_map['", name, "'] must be a file name"));
    }
    shards.insert(shard.as_string());
  }
  WeightStore store;
  for (const std::string& shard : shards) {
    QUIVER_RETURN_IF_ERROR(store.AddFile((fs::path(dir) / shard).string()));
  }
  for (const auto& [name, shard] : map->members()) {
    const TensorInfo* info = store.Find(name);
    if (info == nullptr) {
      return absl::DataLossError(
          StrCat(index.string(), ": tensor '", name, "' is not in its shard ", shard.as_string()));
    }
  }
  return store;
}

const TensorInfo* WeightStore::Find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void WeightStore::DropResidentPages() const {
  for (const MappedFile& file : files_) file.DropResidentPages();
}

size_t WeightStore::weights_bytes() const {
  size_t total = 0;
  for (const auto& [name, info] : tensors_) total += info.size_bytes;
  return total;
}

}  // namespace quiver::engine
