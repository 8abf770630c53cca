// The batch-job parts of `quiver embed` (re-indexing a corpus): records read from JSON lines or
// plain text lines, a deterministic shard of them, a checkpoint that lets a killed job restart
// where it stopped with identical output, the output files, and the progress display. Pure or
// file-level pieces only; app/embed_command.cc runs them against an engine or a worker pool.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace quiver::app {

enum class InputFormat { kJsonLines, kText };

// "jsonl", "text", or "auto": JSON lines for *.jsonl, *.ndjson and *.json, plain text otherwise.
absl::StatusOr<InputFormat> ParseInputFormat(std::string_view flag, std::string_view path);

// One input record. `id_json` is the id as a JSON value (a string or an integer): the record's
// "id" in JSON lines when it has one, else its index in the whole input (0-based, blank lines not
// counted), so that shard outputs concatenate to the unsharded output.
struct Record {
  int64_t index = 0;
  std::string id_json;
  std::string text;
};

// Blank lines (nothing but a trailing '\r') are not records, in either format.
bool IsRecordLine(std::string_view line);

// Reads records in order from a file, or from texts given on the command line. A UTF-8 byte
// order mark at the start of a file is not part of its first record.
class RecordReader {
 public:
  static absl::StatusOr<RecordReader> OpenFile(const std::string& path, InputFormat format);
  static RecordReader FromTexts(std::vector<std::string> texts);
  RecordReader(RecordReader&&) noexcept;
  RecordReader& operator=(RecordReader&&) noexcept;
  ~RecordReader();

  // false at the end. Errors name the file and line ("docs.jsonl:17: ...").
  absl::StatusOr<bool> Next(Record* out);
  // Skips `n` records without parsing them (the lines are still read).
  absl::Status Skip(int64_t n);
  // Where the last record came from, for messages: "docs.jsonl:17", or "--text 3".
  std::string where() const;

 private:
  RecordReader() = default;
  // The next line into buf_ (the first without a UTF-8 byte order mark); false at the end.
  bool ReadNextLine();
  std::FILE* file_ = nullptr;
  std::string path_;
  InputFormat format_ = InputFormat::kText;
  std::vector<std::string> texts_;
  int64_t line_ = 0;   // lines read
  int64_t index_ = 0;  // records returned or skipped
  std::string buf_;
};

// One pass over the input: its records and a 64-bit fingerprint of its bytes (FNV-1a).
struct InputScan {
  int64_t records = 0;
  int64_t bytes = 0;
  uint64_t hash = 0;
};
absl::StatusOr<InputScan> ScanInput(const std::string& path);
InputScan ScanTexts(const std::vector<std::string>& texts);

// --shard I/N: records [total * I / N, total * (I + 1) / N) of the input, so the shards'
// outputs, concatenated in order, are the whole input's.
struct Shard {
  int64_t index = 0;
  int64_t count = 1;
};
absl::StatusOr<Shard> ParseShard(std::string_view spec);
// --shards N: the index from JOB_COMPLETION_INDEX (a Kubernetes Indexed Job), given as `env`.
absl::StatusOr<Shard> ShardFromJobIndex(int64_t count, const char* env);
std::pair<int64_t, int64_t> ShardRange(int64_t total, const Shard& shard);
// "{shard}" in an output path becomes the shard's index.
std::string ExpandShard(std::string path, const Shard& shard);

// What a killed job left: how far its outputs are complete. Written after the outputs are
// synced, atomically (a temporary file renamed over the old one); removed when the job ends.
struct Checkpoint {
  std::string fingerprint;   // the input, the shard, the model and the output options
  int64_t records_done = 0;  // records of the shard whose rows are in the outputs
  int64_t output_bytes = 0;  // the output file's complete prefix (the .npy header included)
  int64_t ids_bytes = 0;     // the ids file's (with .npy output)
};
// nullopt when there is none; an error when it cannot be read or parsed.
absl::StatusOr<std::optional<Checkpoint>> ReadCheckpoint(const std::string& path);
absl::Status WriteCheckpoint(const std::string& path, const Checkpoint& checkpoint);

// A file the job appends to, opened fresh (truncated) or at a checkpoint's length.
class OutputFile {
 public:
  // `resume_bytes` < 0: a new file; else the existing file is cut to that length (it must be at
  // least that long) and appended to.
  static absl::StatusOr<OutputFile> Open(const std::string& path, int64_t resume_bytes);
  static OutputFile Stdout();
  OutputFile(OutputFile&&) noexcept;
  OutputFile& operator=(OutputFile&&) noexcept;
  ~OutputFile();

  absl::Status Append(std::string_view bytes);
  absl::Status Sync();  // fsync; a no-op on stdout
  int64_t bytes() const { return bytes_; }
  const std::string& path() const { return path_; }

 private:
  OutputFile() = default;
  int fd_ = -1;
  bool owned_ = false;
  std::string path_;
  int64_t bytes_ = 0;
};

// A NumPy .npy v1.0 header for a C-order matrix; its length makes the data start 64-aligned.
std::string NpyHeader(std::string_view descr, int64_t rows, int64_t cols);

// Progress on stderr: a bar redrawn in place on a terminal (items, tokens/s, ETA), else one log
// line every `interval`. `total` is the shard's records; counts are since this run started,
// plus `already_done` records from a checkpoint.
class Progress {
 public:
  enum class Mode { kOff, kBar, kLog };
  // "auto" (a bar when stderr is a terminal, else log lines), "bar", "log" or "off".
  static absl::StatusOr<Mode> ParseMode(std::string_view flag);
  Progress(Mode mode, int64_t total, int64_t already_done, std::chrono::seconds interval);
  void Update(int64_t records_done, int64_t tokens_done);  // totals of this run
  void Finish(int64_t records_done, int64_t tokens_done);

  // The text of one update, for tests: "1,234/5,766 items (21.4%) | 12,345 tokens/s | ETA 1m02s".
  static std::string Line(int64_t done, int64_t total, double tokens_per_s, double eta_s);

 private:
  void Draw(int64_t records_done, int64_t tokens_done, bool final);
  Mode mode_;
  int64_t total_, already_done_;
  std::chrono::seconds interval_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace quiver::app
