#include "common/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "common/strings.h"

namespace quiver {
namespace {

absl::Status ErrnoStatus(int err, const std::string& what) {
  std::string message = StrCat(what, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

}  // namespace

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus(errno, path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return absl::DataLossError(StrCat(path, ": read failed"));
  return std::move(buffer).str();
}

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, path);
  }
  MappedFile file;
  file.path_ = path;
  file.size_bytes_ = static_cast<size_t>(st.st_size);
  if (file.size_bytes_ > 0) {
    void* addr = ::mmap(nullptr, file.size_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return ErrnoStatus(err, path);
    }
    file.data_ = static_cast<const uint8_t*>(addr);
  }
  ::close(fd);
  return file;
}

void MappedFile::DropResidentPages() const {
  if (data_ != nullptr) ::madvise(const_cast<uint8_t*>(data_), size_bytes_, MADV_DONTNEED);
}

MappedFile::MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { Reset(); }

void MappedFile::Reset() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_bytes_);
  data_ = nullptr;
  size_bytes_ = 0;
}

std::string FolderName(const std::string& path) {
  std::filesystem::path p = std::filesystem::path(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

}  // namespace quiver
