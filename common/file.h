// Whole-file reads and read-only memory maps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace quiver {

// The last component of a folder path, a trailing separator ignored ("models/bge/" -> "bge"):
// the default name a served model goes by.
std::string FolderName(const std::string& path);

// The file's bytes; NOT_FOUND names the path when it does not exist.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// A read-only, private memory map of a whole file. Move-only; unmaps on destruction.
// Thread-safe for concurrent reads once constructed.
class MappedFile {
 public:
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size_bytes() const { return size_bytes_; }
  const std::string& path() const { return path_; }
  // Gives the pages read so far back (madvise MADV_DONTNEED): the mapping is private and never
  // written, so a later read maps the file's page again, from the page cache or the disk. For a
  // file read once at load (weights copied into their packed forms), whose few pages still in
  // use (an embedding table's rows) come back when read.
  void DropResidentPages() const;

 private:
  void Reset();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_bytes_ = 0;
};

}  // namespace quiver
