// Input files: a FIFO or a directory is refused by name instead of blocking the reader, a
// file larger than its limit is refused by its size before it is read, and lines are
// read within a bound (a 1 GB "line" is refused after a little more than the limit).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "core/files/bounded_line_reader.h"
#include "core/files/input_file.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::files {
namespace {

using headroom::testing::TempDir;

std::string Write(const TempDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string MessageOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(InputFile, AFifoIsRefusedNotWaitedOn) {
  TempDir dir;
  const std::string fifo = dir.path() + "/model.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // With no writer, a plain open() of the FIFO would block this test forever.
  EXPECT_EQ(MessageOf([&] { ::close(OpenRegularFile(fifo, "a safetensors file")); }),
            fifo + ": is a FIFO, expected a safetensors file");
  EXPECT_EQ(MessageOf([&] { RequireRegularFile(fifo, "a .jsonl file"); }),
            fifo + ": is a FIFO, expected a .jsonl file");
  EXPECT_EQ(MessageOf([&] { ReadWholeFile(fifo, 100, "a config.json"); }),
            fifo + ": is a FIFO, expected a config.json");
  EXPECT_EQ(MessageOf([&] { RequireRegularFile(dir.path(), "a .jsonl file"); }),
            dir.path() + ": is a directory, expected a .jsonl file");
  EXPECT_NE(MessageOf([&] { RequireRegularFile(dir.path() + "/none", "x"); }).find("none: cannot be read"),
            std::string::npos);
}

TEST(InputFile, ReadWholeFileRefusesAFileAboveItsLimitUnread) {
  TempDir dir;
  const std::string at = Write(dir, "at.json", std::string(100, 'x'));
  EXPECT_EQ(ReadWholeFile(at, 100, "a config.json"), std::string(100, 'x'));
  const std::string over = Write(dir, "over.json", std::string(101, 'x'));
  EXPECT_EQ(MessageOf([&] { ReadWholeFile(over, 100, "a config.json"); }),
            over + ": 101 bytes is larger than the 100 bytes limit for a config.json");
  // 1 TiB, sparse: refused from its size alone (reading it would take hours and the memory).
  const std::string huge = dir.path() + "/config.json";
  std::ofstream(huge).close();
  ASSERT_EQ(::truncate(huge.c_str(), off_t{1} << 40), 0);
  EXPECT_EQ(MessageOf([&] { ReadWholeFile(huge, kMaxJsonFileBytes, "a config.json"); }),
            huge + ": 1 TiB is larger than the 16 MiB limit for a config.json");
}

std::vector<std::string> Lines(const std::string& text, size_t limit) {
  std::istringstream in(text);
  BoundedLineReader reader(in, limit);
  std::vector<std::string> lines;
  for (std::string line; reader.Next(line);) {
    lines.push_back(line);
    EXPECT_EQ(reader.line_number(), static_cast<int64_t>(lines.size()));
  }
  return lines;
}

TEST(BoundedLineReader, ReadsLinesUpToTheLimitAndRefusesOneByteMore) {
  EXPECT_EQ(Lines("a\n\nbcd\nef", 3), (std::vector<std::string>{"a", "", "bcd", "ef"}));
  EXPECT_EQ(Lines("", 3), std::vector<std::string>{});
  EXPECT_EQ(Lines("abc\n", 3), std::vector<std::string>{"abc"});
  try {
    Lines("a\nbc\nabcd\n", 3);
    FAIL() << "a 4-byte line passed a 3-byte limit";
  } catch (const LineTooLongError& e) {
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(std::string(e.what()), "the line is longer than 3 bytes (the limit for one line, one record)");
  }
  // Across the reader's 64 KiB buffer: a line exactly at a limit above the buffer passes.
  const size_t limit = (size_t{64} << 10) * 3 + 5;
  EXPECT_EQ(Lines("x\n" + std::string(limit, 'y') + "\nz", limit).size(), 3u);
  EXPECT_THROW(Lines("x\n" + std::string(limit + 1, 'y'), limit), LineTooLongError);
}

// Five good lines, then 1 GB of NUL bytes with no line end (a sparse file: the test writes
// nothing to disk): line 6 is refused after reading about the limit of it, at bounded memory.
TEST(BoundedLineReader, AGigabyteLineIsRefusedAfterTheLimitAtBoundedMemory) {
  TempDir dir;
  const std::string path = Write(dir, "data.jsonl", std::string(5, '\n'));
  ASSERT_EQ(::truncate(path.c_str(), (off_t{1} << 30) + 5), 0);
  std::ifstream in(path, std::ios::binary);
  BoundedLineReader reader(in);
  std::string line;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(reader.Next(line));
  try {
    reader.Next(line);
    FAIL() << "a 1 GiB line was read";
  } catch (const LineTooLongError& e) {
    EXPECT_EQ(e.line(), 6);
    EXPECT_EQ(e.limit(), kMaxInputLineBytes);
  }
  EXPECT_LE(static_cast<size_t>(in.tellg()), kMaxInputLineBytes + (size_t{128} << 10)) << "read beyond the limit";
  EXPECT_LE(line.capacity(), 2 * kMaxInputLineBytes);
}

}  // namespace
}  // namespace headroom::files
