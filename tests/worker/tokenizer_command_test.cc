// `headroom-worker tokenize` as a user runs it: the binary on stdin, one JSON value a line,
// on the example job's tokenizer (configs/models/qwen2-tiny-addition) against the ids and
// decodes Hugging Face `tokenizers` gave for fixtures/tokenizer/corpus.jsonl; and its exit 2
// with the line or the field named. The tokenizer itself: tests/worker/tokenizer/.
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/protocol/exit_codes.h"
#include "tests/helpers/temp_dir.h"
#include "worker/cli/tokenize_command.h"

namespace headroom::worker {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFixtures = fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/tokenizer";
const fs::path kTinyTokenizer = fs::path(HEADROOM_SOURCE_DIR) / "configs/models/qwen2-tiny-addition";

std::vector<json> ReadJsonLines(const fs::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in) << file;
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(json::parse(line));
  }
  return lines;
}

struct WorkerRun {
  int code = -1;
  std::string out;  // stdout and stderr
};
WorkerRun Worker(const std::string& args, const std::string& input) {
  testing::TempDir dir("headroom-tokenize");
  const fs::path in = fs::path(dir.path()) / "in.jsonl";
  std::ofstream(in) << input;
  const std::string command =
      std::string(HEADROOM_BINARY_DIR) + "/bin/headroom-worker tokenize " + args + " < '" + in.string() + "' 2>&1";
  WorkerRun r;
  FILE* p = popen(command.c_str(), "r");
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  r.code = WEXITSTATUS(pclose(p));
  return r;
}

std::string ReadFile(const fs::path& file) {
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<json> Lines(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

TEST(TokenizeCommand, EncodesAndDecodesTheCorpusLikeTokenizers) {
  const std::string model = "--model '" + kTinyTokenizer.string() + "'";
  const WorkerRun encoded = Worker(model, ReadFile(kFixtures / "corpus.jsonl"));
  ASSERT_EQ(encoded.code, 0) << encoded.out;
  EXPECT_EQ(Lines(encoded.out), ReadJsonLines(kFixtures / "expected_tiny.jsonl"));
  const WorkerRun decoded = Worker(model + " --decode", ReadFile(kFixtures / "expected_tiny.jsonl"));
  ASSERT_EQ(decoded.code, 0) << decoded.out;
  EXPECT_EQ(Lines(decoded.out), ReadJsonLines(kFixtures / "expected_decode_tiny.jsonl"));
}

TEST(TokenizeCommand, ABadLineIsNamedAndExitsTwo) {
  const std::string model = "--model '" + kTinyTokenizer.string() + "'";
  WorkerRun r = Worker(model, "\"fine\"\n[1, 2]\n");
  EXPECT_EQ(r.code, protocol::kExitInvalidSpec) << r.out;
  EXPECT_NE(r.out.find("line 2: expected a JSON string"), std::string::npos) << r.out;
  r = Worker(model + " --decode", "[1, 2]\n[1, 99999999]\n");
  EXPECT_EQ(r.code, protocol::kExitInvalidSpec) << r.out;
  EXPECT_NE(r.out.find("line 2: token id 99999999"), std::string::npos) << r.out;
  r = Worker(model + " --decode", "not json\n");
  EXPECT_EQ(r.code, protocol::kExitInvalidSpec) << r.out;
  EXPECT_NE(r.out.find("line 1: not valid JSON"), std::string::npos) << r.out;
}

// Two good lines, then 1 GiB of NUL bytes without a line end (a sparse file): line 3 is
// refused after reading about the limit of it, the first two answered.
TEST(TokenizeCommand, AGigabyteLineIsRefusedNamingTheLine) {
  testing::TempDir dir("headroom-tokenize");
  const fs::path in = fs::path(dir.path()) / "in.jsonl";
  const std::string good = "\"1 + 2\"\n\"3\"\n";
  std::ofstream(in) << good;
  ASSERT_EQ(::truncate(in.c_str(), static_cast<off_t>(good.size()) + (off_t{1} << 30)), 0);
  const std::string command = std::string(HEADROOM_BINARY_DIR) + "/bin/headroom-worker tokenize --model '" +
                              kTinyTokenizer.string() + "' < '" + in.string() + "' 2>&1";
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(WEXITSTATUS(pclose(p)), protocol::kExitInvalidSpec) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3) << out;
  EXPECT_NE(out.find("headroom-worker tokenize: line 3: the line is longer than 4 MiB"), std::string::npos) << out;
}

TEST(TokenizeCommand, ALineOneByteOverTheLimitIsRefused) {
  const std::string model = kTinyTokenizer.string();
  const char* argv[] = {"tokenize", "--model", model.c_str()};
  for (size_t limit : {size_t{7}, size_t{6}}) {  // the second line, "12345", is 7 bytes
    std::istringstream in("\"1\"\n\"12345\"\n");
    std::ostringstream out, err;
    const int code = RunTokenizeCommand(3, argv, in, out, err, limit);
    if (limit == 7) {
      EXPECT_EQ(code, 0) << err.str();
    } else {
      EXPECT_EQ(code, protocol::kExitInvalidSpec);
      EXPECT_EQ(err.str(), "headroom-worker tokenize: line 2: the line is longer than 6 bytes (the limit for one line, "
                           "one record)\n");
    }
  }
}

// A tokenizer.json that is a FIFO is refused, not waited on (a plain open would block
// until something writes to it).
TEST(TokenizeCommand, AFifoTokenizerIsRefused) {
  testing::TempDir dir("headroom-tokenize");
  const std::string fifo = dir.path() + "/tokenizer.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const WorkerRun r = Worker("--model '" + dir.path() + "'", "\"x\"\n");
  EXPECT_EQ(r.code, protocol::kExitInvalidSpec) << r.out;
  EXPECT_NE(r.out.find(fifo + ": is a FIFO, expected a tokenizer.json"), std::string::npos) << r.out;
}

TEST(TokenizeCommand, AnUnusableTokenizerExitsTwoNamingTheField) {
  testing::TempDir dir("headroom-tokenize");
  std::ifstream in(kTinyTokenizer / "tokenizer.json");
  json file = json::parse(in);
  file["model"]["type"] = "WordPiece";
  std::ofstream(fs::path(dir.path()) / "tokenizer.json") << file.dump();
  const WorkerRun r = Worker("--model '" + dir.path() + "'", "\"x\"\n");
  EXPECT_EQ(r.code, protocol::kExitInvalidSpec) << r.out;
  EXPECT_NE(r.out.find("tokenizer.json: model.type"), std::string::npos) << r.out;
  const WorkerRun missing = Worker("--model '" + dir.path() + "/nowhere'", "\"x\"\n");
  EXPECT_EQ(missing.code, protocol::kExitInvalidSpec) << missing.out;
  EXPECT_NE(missing.out.find("tokenizer.json: cannot be read"), std::string::npos) << missing.out;
}

}  // namespace
}  // namespace headroom::worker
