#include "common/file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace quiver {
namespace {

// The resident kilobytes of the mapping that holds `address` (/proc/self/smaps), or -1.
int64_t ResidentKb(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2) {
      inside = begin <= at && at < end;
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      return std::stoll(line.substr(4));
    }
  }
  return -1;
}

// A mapped file's pages given back come back with the file's bytes when read again.
TEST(MappedFileTest, DroppedPagesReadBackTheFile) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("quiver_file_test_" + std::to_string(getpid()));
  constexpr size_t kBytes = 4 << 20;
  std::vector<char> pattern(kBytes);
  for (size_t i = 0; i < kBytes; ++i) pattern[i] = static_cast<char>((i * 2654435761u) >> 13);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(pattern.data(), static_cast<std::streamsize>(kBytes));
  }
  absl::StatusOr<MappedFile> file = MappedFile::Open(path.string());
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->size_bytes(), kBytes);
  auto matches = [&] {
    for (size_t i = 0; i < kBytes; ++i) {
      if (file->data()[i] != static_cast<uint8_t>(pattern[i])) return false;
    }
    return true;
  };
  ASSERT_TRUE(matches());
  const int64_t read = ResidentKb(file->data());
  EXPECT_GE(read, 3 * 1024) << "every page was read";
  file->DropResidentPages();
  const int64_t dropped = ResidentKb(file->data());
  EXPECT_GE(dropped, 0);
  EXPECT_LT(dropped, 256) << "read: " << read << " kB";
  EXPECT_TRUE(matches());
  EXPECT_GE(ResidentKb(file->data()), 3 * 1024);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace quiver
