#include "app/embed_job.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <utility>

#include "common/file.h"
#include "common/json.h"
#include "common/status.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace quiver::app {
namespace {

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t Fnv1a(uint64_t h, std::string_view bytes) {
  for (unsigned char c : bytes) h = (h ^ c) * kFnvPrime;
  return h;
}

// The longest line a record may take; a longer one (a file without newlines, say) is refused
// rather than read whole into memory. Texts are cut to the model's input length anyway.
constexpr size_t kMaxLineBytes = size_t{64} << 20;

// One line without its '\n'; false at the end of the file. `line` holds at most kMaxLineBytes + 1
// bytes; the rest of a longer line is read and dropped (the caller refuses it).
bool ReadLine(std::FILE* file, std::string& line) {
  line.clear();
  int c;
  bool any = false;
  while ((c = std::getc(file)) != EOF) {
    any = true;
    if (c == '\n') return true;
    if (line.size() <= kMaxLineBytes) line.push_back(static_cast<char>(c));
  }
  return any;
}

// A UTF-8 byte order mark, which some Windows editors and tools write at the start of a file: not
// part of the first record (a JSON parser would refuse it; a tokenizer would drop it).
constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

std::string_view WithoutCr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

absl::Status Errno(std::string_view what, const std::string& path) {
  return absl::UnavailableError(StrCat(path, ": ", what, ": ", std::strerror(errno)));
}

absl::StatusOr<int64_t> ParseCount(std::string_view s, std::string_view what) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return absl::InvalidArgumentError(StrCat(what, ": '", s, "' is not a whole number"));
  }
  return v;
}

std::string Thousands(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return v < 0 ? "-" + out : out;
}

std::string Duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = static_cast<int64_t>(std::llround(s));
  if (t >= 3600) return fmt::format("{}h{:02}m{:02}s", t / 3600, t / 60 % 60, t % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

}  // namespace

absl::StatusOr<InputFormat> ParseInputFormat(std::string_view flag, std::string_view path) {
  if (flag == "jsonl") return InputFormat::kJsonLines;
  if (flag == "text") return InputFormat::kText;
  if (flag != "auto") {
    return absl::InvalidArgumentError(
        StrCat("--input-format: '", flag, "' is not auto, jsonl or text"));
  }
  for (std::string_view ext : {".jsonl", ".ndjson", ".json"}) {
    if (path.size() >= ext.size() && path.substr(path.size() - ext.size()) == ext) {
      return InputFormat::kJsonLines;
    }
  }
  return InputFormat::kText;
}

bool IsRecordLine(std::string_view line) { return !WithoutCr(line).empty(); }

absl::StatusOr<RecordReader> RecordReader::OpenFile(const std::string& path, InputFormat format) {
  RecordReader r;
  r.file_ = std::fopen(path.c_str(), "rb");
  if (r.file_ == nullptr) {
    return absl::NotFoundError(StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  r.path_ = path;
  r.format_ = format;
  return r;
}

RecordReader RecordReader::FromTexts(std::vector<std::string> texts) {
  RecordReader r;
  r.texts_ = std::move(texts);
  return r;
}

RecordReader::RecordReader(RecordReader&& o) noexcept { *this = std::move(o); }

RecordReader& RecordReader::operator=(RecordReader&& o) noexcept {
  if (this != &o) {
    if (file_ != nullptr) std::fclose(file_);
    file_ = std::exchange(o.file_, nullptr);
    path_ = std::move(o.path_);
    format_ = o.format_;
    texts_ = std::move(o.texts_);
    line_ = o.line_;
    index_ = o.index_;
  }
  return *this;
}

RecordReader::~RecordReader() {
  if (file_ != nullptr) std::fclose(file_);
}

bool RecordReader::ReadNextLine() {
  if (!ReadLine(file_, buf_)) return false;
  if (++line_ == 1 && buf_.starts_with(kUtf8Bom)) buf_.erase(0, kUtf8Bom.size());
  return true;
}

absl::Status RecordReader::Skip(int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (file_ == nullptr) {
      if (index_ >= static_cast<int64_t>(texts_.size())) break;
      ++index_;
      continue;
    }
    bool found = false;
    while (ReadNextLine()) {
      if (IsRecordLine(buf_)) {
        found = true;
        break;
      }
    }
    if (!found) {
      return absl::DataLossError(StrCat(path_, ": ended after ", index_,
                                        " records; the job expected more (did the "
                                        "input change?)"));
    }
    ++index_;
  }
  return absl::OkStatus();
}

std::string RecordReader::where() const {
  return file_ != nullptr ? StrCat(path_, ":", line_) : StrCat("--text ", index_);
}

absl::StatusOr<bool> RecordReader::Next(Record* out) {
  if (file_ == nullptr) {
    if (index_ >= static_cast<int64_t>(texts_.size())) return false;
    out->index = index_;
    out->id_json = std::to_string(index_);
    out->text = texts_[index_++];
    return true;
  }
  while (ReadNextLine()) {
    if (!IsRecordLine(buf_)) continue;
    if (buf_.size() > kMaxLineBytes) {
      return absl::InvalidArgumentError(
          StrCat(path_, ":", line_, ": the line is longer than ", kMaxLineBytes >> 20, " MiB"));
    }
    const std::string_view line = WithoutCr(buf_);
    out->index = index_;
    if (format_ == InputFormat::kText) {
      out->id_json = std::to_string(index_);
      out->text.assign(line);
      ++index_;
      return true;
    }
    const std::string where = StrCat(path_, ":", line_);
    absl::StatusOr<JsonValue> json = JsonValue::Parse(line);
    if (!json.ok()) return WithContext(json.status(), where);
    if (!json->is_object()) {
      return absl::InvalidArgumentError(
          StrCat(where, ": a line must be a JSON object with \"text\" (and optionally \"id\")"));
    }
    absl::StatusOr<std::string> text = JsonString(*json, "text");
    if (!text.ok()) return WithContext(text.status(), where);
    out->text = *std::move(text);
    const JsonValue* id = json->Find("id");
    if (id == nullptr || id->is_null()) {
      out->id_json = std::to_string(index_);
    } else if (id->is_string()) {
      out->id_json = StrCat("\"", JsonEscape(id->as_string()), "\"");
    } else if (id->is_int()) {
      out->id_json = std::to_string(id->as_int());
    } else {
      return absl::InvalidArgumentError(StrCat(
          where, ": \"id\" must be a string or an integer, not ", JsonValue::TypeName(id->type())));
    }
    ++index_;
    return true;
  }
  if (std::ferror(file_)) return Errno("read", path_);
  return false;
}

absl::StatusOr<InputScan> ScanInput(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  // In blocks, never a whole line in memory: a line is a record unless it is empty or a lone
  // '\r' (IsRecordLine), a leading byte order mark left out as RecordReader leaves it out.
  InputScan scan;
  scan.hash = kFnvOffset;
  std::vector<char> block(size_t{1} << 16);
  int64_t length = 0;  // of the current line so far
  char first = 0;
  const auto end_line = [&] {
    if (length >= 2 || (length == 1 && first != '\r')) ++scan.records;
    length = 0;
  };
  for (size_t n; (n = std::fread(block.data(), 1, block.size(), file)) > 0;) {
    const std::string_view read(block.data(), n);
    const size_t skip = scan.bytes == 0 && read.starts_with(kUtf8Bom) ? kUtf8Bom.size() : 0;
    scan.bytes += static_cast<int64_t>(n);
    scan.hash = Fnv1a(scan.hash, read);
    for (size_t i = skip; i < n; ++i) {
      if (block[i] == '\n') {
        end_line();
      } else if (length++ == 0) {
        first = block[i];
      }
    }
  }
  end_line();
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return Errno("read", path);
  return scan;
}

InputScan ScanTexts(const std::vector<std::string>& texts) {
  InputScan scan;
  scan.hash = kFnvOffset;
  for (const std::string& t : texts) {
    scan.hash = Fnv1a(Fnv1a(scan.hash, t), std::string_view("\0", 1));
    scan.bytes += static_cast<int64_t>(t.size());
  }
  scan.records = static_cast<int64_t>(texts.size());
  return scan;
}

absl::StatusOr<Shard> ParseShard(std::string_view spec) {
  const size_t slash = spec.find('/');
  if (slash == std::string_view::npos) {
    return absl::InvalidArgumentError(
        StrCat("--shard: '", spec, "' is not I/N (shard I of N, I from 0)"));
  }
  absl::StatusOr<int64_t> index = ParseCount(spec.substr(0, slash), "--shard");
  if (!index.ok()) return index.status();
  absl::StatusOr<int64_t> count = ParseCount(spec.substr(slash + 1), "--shard");
  if (!count.ok()) return count.status();
  if (*count < 1 || *index < 0 || *index >= *count) {
    return absl::InvalidArgumentError(
        StrCat("--shard ", spec, ": I must be in [0, N) and N at least 1"));
  }
  return Shard{*index, *count};
}

absl::StatusOr<Shard> ShardFromJobIndex(int64_t count, const char* env) {
  if (count < 1) return absl::InvalidArgumentError("--shards must be at least 1");
  if (env == nullptr || *env == '\0') {
    return absl::InvalidArgumentError(
        "--shards N takes the shard's index from JOB_COMPLETION_INDEX (a Kubernetes Indexed "
        "Job), which is not set; give --shard I/N instead");
  }
  absl::StatusOr<int64_t> index = ParseCount(env, "JOB_COMPLETION_INDEX");
  if (!index.ok()) return index.status();
  if (*index < 0 || *index >= count) {
    return absl::InvalidArgumentError(StrCat("JOB_COMPLETION_INDEX=", *index, " is not in [0, ",
                                             count, ") (--shards ", count,
                                             "; the Job's completions must equal --shards)"));
  }
  return Shard{*index, count};
}

std::pair<int64_t, int64_t> ShardRange(int64_t total, const Shard& shard) {
  // total * i / count without overflow: q * i + r * i / count, with total = q * count + r.
  const int64_t q = total / shard.count, r = total % shard.count;
  const auto at = [&](int64_t i) { return q * i + r * i / shard.count; };
  return {at(shard.index), at(shard.index + 1)};
}

std::string ExpandShard(std::string path, const Shard& shard) {
  const std::string index = std::to_string(shard.index);
  for (size_t at; (at = path.find("{shard}")) != std::string::npos;) {
    path.replace(at, 7, index);
  }
  return path;
}

absl::StatusOr<std::optional<Checkpoint>> ReadCheckpoint(const std::string& path) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (ec) return absl::UnavailableError(StrCat(path, ": ", ec.message()));
  if (!exists) return std::optional<Checkpoint>();
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<JsonValue> json = JsonValue::Parse(*text);
  if (!json.ok()) return WithContext(json.status(), path);
  Checkpoint c;
  absl::StatusOr<std::string> fingerprint = JsonString(*json, "fingerprint");
  absl::StatusOr<int64_t> records = JsonInt(*json, "records_done");
  absl::StatusOr<int64_t> output = JsonInt(*json, "output_bytes");
  absl::StatusOr<int64_t> ids = JsonInt(*json, "ids_bytes", 0);
  for (const absl::Status& s :
       {fingerprint.status(), records.status(), output.status(), ids.status()}) {
    if (!s.ok()) return WithContext(s, path);
  }
  c.fingerprint = *fingerprint;
  c.records_done = *records;
  c.output_bytes = *output;
  c.ids_bytes = *ids;
  if (c.records_done < 0 || c.output_bytes < 0 || c.ids_bytes < 0) {
    return absl::DataLossError(StrCat(path, ": negative counts"));
  }
  return std::optional<Checkpoint>(c);
}

absl::Status WriteCheckpoint(const std::string& path, const Checkpoint& c) {
  const std::string tmp = path + ".tmp";
  const std::string text =
      StrCat("{\"version\":1,\"fingerprint\":\"", JsonEscape(c.fingerprint),
             "\",\"records_done\":", c.records_done, ",\"output_bytes\":", c.output_bytes,
             ",\"ids_bytes\":", c.ids_bytes, "}\n");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("open", tmp);
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  errno = saved;
  if (!ok) return Errno("write", tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Errno("rename", tmp);
  return absl::OkStatus();
}

absl::StatusOr<OutputFile> OutputFile::Open(const std::string& path, int64_t resume_bytes) {
  OutputFile f;
  f.path_ = path;
  f.owned_ = true;
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (resume_bytes < 0 ? O_TRUNC : 0);
  f.fd_ = ::open(path.c_str(), flags, 0644);
  if (f.fd_ < 0) return Errno("cannot write", path);
  if (resume_bytes >= 0) {
    struct stat st {};
    if (::fstat(f.fd_, &st) != 0) return Errno("stat", path);
    if (st.st_size < resume_bytes) {
      return absl::DataLossError(
          StrCat(path, " holds ", st.st_size, " bytes, fewer than the ", resume_bytes,
                 " its checkpoint says were written; start over with --restart"));
    }
    if (::ftruncate(f.fd_, resume_bytes) != 0) return Errno("truncate", path);
    if (::lseek(f.fd_, resume_bytes, SEEK_SET) < 0) return Errno("seek", path);
    f.bytes_ = resume_bytes;
  }
  return f;
}

OutputFile OutputFile::Stdout() {
  OutputFile f;
  f.fd_ = STDOUT_FILENO;
  f.path_ = "stdout";
  return f;
}

OutputFile::OutputFile(OutputFile&& o) noexcept { *this = std::move(o); }

OutputFile& OutputFile::operator=(OutputFile&& o) noexcept {
  if (this != &o) {
    if (owned_ && fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    owned_ = std::exchange(o.owned_, false);
    path_ = std::move(o.path_);
    bytes_ = o.bytes_;
  }
  return *this;
}

OutputFile::~OutputFile() {
  if (owned_ && fd_ >= 0) ::close(fd_);
}

absl::Status OutputFile::Append(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("write", path_);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
    bytes_ += n;
  }
  return absl::OkStatus();
}

absl::Status OutputFile::Sync() {
  if (!owned_) return absl::OkStatus();
  if (::fsync(fd_) != 0) return Errno("fsync", path_);
  return absl::OkStatus();
}

std::string NpyHeader(std::string_view descr, int64_t rows, int64_t cols) {
  std::string header = StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (", rows,
                              ", ", cols, "), }");
  // Magic + version 1.0 + u16 length; padded so that the data starts 64-aligned.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  const uint16_t len = static_cast<uint16_t>(header.size());
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(len & 0xff));
  out.push_back(static_cast<char>(len >> 8));
  return out + header;
}

absl::StatusOr<Progress::Mode> Progress::ParseMode(std::string_view flag) {
  if (flag == "off") return Mode::kOff;
  if (flag == "bar") return Mode::kBar;
  if (flag == "log") return Mode::kLog;
  if (flag == "auto") return ::isatty(STDERR_FILENO) ? Mode::kBar : Mode::kLog;
  return absl::InvalidArgumentError(
      StrCat("--progress: '", flag, "' is not auto, bar, log or off"));
}

Progress::Progress(Mode mode, int64_t total, int64_t already_done, std::chrono::seconds interval)
    : mode_(mode),
      total_(total),
      already_done_(already_done),
      interval_(interval),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

std::string Progress::Line(int64_t done, int64_t total, double tokens_per_s, double eta_s) {
  const double pct =
      total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0;
  return fmt::format("{}/{} items ({:.1f}%) | {} tokens/s | ETA {}", Thousands(done),
                     Thousands(total), pct, Thousands(std::llround(tokens_per_s)), Duration(eta_s));
}

void Progress::Draw(int64_t records_done, int64_t tokens_done, bool final) {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double tps = elapsed > 0 ? static_cast<double>(tokens_done) / elapsed : 0;
  const int64_t done = already_done_ + records_done;
  const double eta = records_done > 0 ? static_cast<double>(total_ - done) * elapsed /
                                            static_cast<double>(records_done)
                                      : -1;
  const std::string line = Line(done, total_, tps, final ? 0 : eta);
  if (mode_ == Mode::kBar) {
    constexpr int kWidth = 24;
    const int filled = total_ > 0 ? static_cast<int>(kWidth * done / total_) : kWidth;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kWidth - filled), '.');
    std::fprintf(stderr, "\r\x1b[K[%s] %s%s", bar.c_str(), line.c_str(), final ? "\n" : "");
    std::fflush(stderr);
  } else {
    spdlog::info("quiver embed: {}{}", line,
                 final ? fmt::format(" | done in {}", Duration(elapsed)) : "");
  }
  last_draw_ = now;
}

void Progress::Update(int64_t records_done, int64_t tokens_done) {
  if (mode_ == Mode::kOff) return;
  const auto now = std::chrono::steady_clock::now();
  const auto every =
      mode_ == Mode::kBar ? std::chrono::milliseconds(200) : std::chrono::milliseconds(interval_);
  if (now - last_draw_ < every) return;
  Draw(records_done, tokens_done, false);
}

void Progress::Finish(int64_t records_done, int64_t tokens_done) {
  if (mode_ == Mode::kOff) return;
  Draw(records_done, tokens_done, true);
}

}  // namespace quiver::app
