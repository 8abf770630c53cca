// quiver embed's batch-job pieces: records, shards, checkpoints, outputs, progress text.
#include "app/embed_job.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/file.h"
#include "gtest/gtest.h"

namespace quiver::app {
namespace {

namespace fs = std::filesystem;

class EmbedJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("quiver-embed-job-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(EmbedJobTest, FormatByFlagOrExtension) {
  EXPECT_EQ(*ParseInputFormat("auto", "a/b.jsonl"), InputFormat::kJsonLines);
  EXPECT_EQ(*ParseInputFormat("auto", "a/b.ndjson"), InputFormat::kJsonLines);
  EXPECT_EQ(*ParseInputFormat("auto", "a/b.txt"), InputFormat::kText);
  EXPECT_EQ(*ParseInputFormat("jsonl", "a/b.txt"), InputFormat::kJsonLines);
  EXPECT_EQ(*ParseInputFormat("text", "a/b.jsonl"), InputFormat::kText);
  EXPECT_FALSE(ParseInputFormat("csv", "a").ok());
}

TEST_F(EmbedJobTest, JsonLinesRecordsKeepTheirIdsAndSkipBlankLines) {
  const std::string path = Write("in.jsonl",
                                 "{\"id\": \"a/1\", \"text\": \"first\"}\n\r\n\n"
                                 "{\"text\": \"no id\"}\r\n{\"id\": 7, \"text\": \"x\\ny\"}");
  absl::StatusOr<InputScan> scan = ScanInput(path);
  ASSERT_TRUE(scan.ok()) << scan.status();
  EXPECT_EQ(scan->records, 3);
  absl::StatusOr<RecordReader> r = RecordReader::OpenFile(path, InputFormat::kJsonLines);
  ASSERT_TRUE(r.ok());
  Record rec;
  ASSERT_TRUE(*r->Next(&rec));
  EXPECT_EQ(rec.id_json, "\"a/1\"");
  EXPECT_EQ(rec.text, "first");
  EXPECT_EQ(rec.index, 0);
  ASSERT_TRUE(*r->Next(&rec));
  EXPECT_EQ(rec.id_json, "1");  // no id: the record's index
  EXPECT_EQ(rec.text, "no id");
  ASSERT_TRUE(*r->Next(&rec));
  EXPECT_EQ(rec.id_json, "7");
  EXPECT_EQ(rec.text, "x\ny");
  EXPECT_FALSE(*r->Next(&rec));
}

// A file saved with a UTF-8 byte order mark (Notepad, PowerShell's Out-File, Python's utf-8-sig):
// the mark is not part of the first record, in either format, and a line holding only the mark is
// blank; a mark anywhere else is the record's own text.
TEST_F(EmbedJobTest, AByteOrderMarkStartingTheFileIsNotText) {
  const std::string bom = "\xEF\xBB\xBF";
  const std::string jsonl = Write("bom.jsonl", bom + "{\"id\": \"a\", \"text\": \"first\"}\r\n" +
                                                   "{\"text\": \"" + bom + "second\"}\r\n");
  absl::StatusOr<InputScan> scan = ScanInput(jsonl);
  ASSERT_TRUE(scan.ok()) << scan.status();
  EXPECT_EQ(scan->records, 2);
  absl::StatusOr<RecordReader> r = RecordReader::OpenFile(jsonl, InputFormat::kJsonLines);
  ASSERT_TRUE(r.ok());
  Record rec;
  absl::StatusOr<bool> next = r->Next(&rec);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(rec.id_json, "\"a\"");
  EXPECT_EQ(rec.text, "first");
  ASSERT_TRUE(*r->Next(&rec));
  EXPECT_EQ(rec.text, bom + "second");

  const std::string text = Write("bom.txt", bom + "\r\none\n" + bom + "two\n");
  scan = ScanInput(text);
  ASSERT_TRUE(scan.ok()) << scan.status();
  EXPECT_EQ(scan->records, 2);  // the first line held only the mark
  r = RecordReader::OpenFile(text, InputFormat::kText);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->Skip(1).ok());
  ASSERT_TRUE(*r->Next(&rec));
  EXPECT_EQ(rec.text, bom + "two");
  EXPECT_EQ(rec.index, 1);
  EXPECT_FALSE(*r->Next(&rec));
}

TEST_F(EmbedJobTest, BadLinesNameTheFileAndLine) {
  const std::string path = Write("bad.jsonl", "{\"text\": \"ok\"}\n\n{\"txt\": \"typo\"}\n");
  absl::StatusOr<RecordReader> r = RecordReader::OpenFile(path, InputFormat::kJsonLines);
  Record rec;
  ASSERT_TRUE(*r->Next(&rec));
  absl::StatusOr<bool> bad = r->Next(&rec);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.jsonl:3"), std::string_view::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("text"), std::string_view::npos) << bad.status();

  const std::string ids = Write("ids.jsonl", "{\"id\": [1], \"text\": \"t\"}\n");
  r = RecordReader::OpenFile(ids, InputFormat::kJsonLines);
  bad = r->Next(&rec);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"id\""), std::string_view::npos) << bad.status();
  EXPECT_FALSE(RecordReader::OpenFile((dir_ / "absent").string(), InputFormat::kText).ok());
}

TEST_F(EmbedJobTest, TextLinesAndSkip) {
  const std::string path = Write("in.txt", "zero\none\n\ntwo\r\nthree\n");
  absl::StatusOr<RecordReader> r = RecordReader::OpenFile(path, InputFormat::kText);
  ASSERT_TRUE(r->Skip(2).ok());
  Record rec;
  ASSERT_TRUE(*r->Next(&rec));
  EXPECT_EQ(rec.text, "two");
  EXPECT_EQ(rec.index, 2);
  EXPECT_EQ(rec.id_json, "2");
  EXPECT_FALSE(r->Skip(5).ok());  // the input ended early: named, not silently short
}

TEST_F(EmbedJobTest, FingerprintFollowsTheBytes) {
  const uint64_t a = ScanInput(Write("a.txt", "one\ntwo\n"))->hash;
  const uint64_t b = ScanInput(Write("b.txt", "one\ntwo\n"))->hash;
  const uint64_t c = ScanInput(Write("c.txt", "one\ntwp\n"))->hash;
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST_F(EmbedJobTest, ShardsAreContiguousAndCoverTheInput) {
  for (int64_t total : {0, 1, 5, 100, 5766}) {
    for (int64_t n : {1, 2, 3, 7, 16}) {
      int64_t expect_begin = 0;
      for (int64_t i = 0; i < n; ++i) {
        const auto [b, e] = ShardRange(total, Shard{i, n});
        EXPECT_EQ(b, expect_begin);
        EXPECT_LE(e - b, total / n + 1);
        expect_begin = e;
      }
      EXPECT_EQ(expect_begin, total);
    }
  }
  EXPECT_EQ(ParseShard("2/4")->index, 2);
  EXPECT_EQ(ParseShard("2/4")->count, 4);
  for (const char* bad : {"4/4", "-1/4", "1", "a/b", "1/0", "1/4x"}) {
    EXPECT_FALSE(ParseShard(bad).ok()) << bad;
  }
  EXPECT_EQ(ShardFromJobIndex(3, "2")->index, 2);
  EXPECT_FALSE(ShardFromJobIndex(3, "3").ok());
  EXPECT_FALSE(ShardFromJobIndex(3, nullptr).ok());
  EXPECT_EQ(ExpandShard("out/part-{shard}.npy", Shard{3, 8}), "out/part-3.npy");
}

TEST_F(EmbedJobTest, CheckpointRoundTrips) {
  const std::string path = (dir_ / "out.npy.checkpoint").string();
  EXPECT_FALSE(ReadCheckpoint(path)->has_value());
  Checkpoint c{"input=1:2;shard=0/1", 42, 4096, 300};
  ASSERT_TRUE(WriteCheckpoint(path, c).ok());
  absl::StatusOr<std::optional<Checkpoint>> back = ReadCheckpoint(path);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->fingerprint, c.fingerprint);
  EXPECT_EQ((*back)->records_done, 42);
  EXPECT_EQ((*back)->output_bytes, 4096);
  EXPECT_EQ((*back)->ids_bytes, 300);
  Write("out.npy.checkpoint", "{\"fingerprint\": 3}");
  EXPECT_FALSE(ReadCheckpoint(path).ok());
}

TEST_F(EmbedJobTest, OutputResumesAtTheCheckpointLength) {
  const std::string path = (dir_ / "out.bin").string();
  {
    absl::StatusOr<OutputFile> f = OutputFile::Open(path, -1);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->Append("committed|torn write").ok());
  }
  {
    absl::StatusOr<OutputFile> f = OutputFile::Open(path, 10);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->bytes(), 10);
    ASSERT_TRUE(f->Append("next").ok());
  }
  EXPECT_EQ(*ReadFile(path), "committed|next");
  // A checkpoint longer than the file: refused, naming --restart.
  absl::StatusOr<OutputFile> f = OutputFile::Open(path, 1000);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("--restart"), std::string_view::npos);
}

TEST_F(EmbedJobTest, NpyHeaderIsAlignedAndParsable) {
  const std::string h = NpyHeader("<f4", 5766, 384);
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(static_cast<size_t>(static_cast<uint8_t>(h[8]) | static_cast<uint8_t>(h[9]) << 8),
            h.size() - 10);
  EXPECT_NE(h.find("'shape': (5766, 384)"), std::string::npos);
  EXPECT_EQ(h.back(), '\n');
}

TEST_F(EmbedJobTest, ProgressLineSaysItemsRateAndEta) {
  EXPECT_EQ(Progress::Line(1234, 5766, 12345.4, 62),
            "1,234/5,766 items (21.4%) | 12,345 tokens/s | ETA 1m02s");
  EXPECT_EQ(Progress::Line(0, 10, 0, -1), "0/10 items (0.0%) | 0 tokens/s | ETA ?");
  EXPECT_EQ(Progress::Line(10, 10, 5, 7300), "10/10 items (100.0%) | 5 tokens/s | ETA 2h01m40s");
}

}  // namespace
}  // namespace quiver::app
