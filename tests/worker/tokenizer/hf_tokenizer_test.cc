// HfTokenizer on small tokenizer.json files written here: added tokens found before BPE with
// their lstrip/rstrip/single_word/normalized options (the cases are tokenizers' own, from
// its added_vocabulary.rs tests), decoding with and without special tokens, the names read
// from tokenizer_config.json, and refusals that name the file and field. The real Qwen3 and
// Llama 3 tokenizers against tokenizers itself: conformance_test.cc.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/helpers/temp_dir.h"
#include "worker/tokenizer/added_vocabulary.h"
#include "worker/tokenizer/bpe_model.h"
#include "worker/tokenizer/byte_level.h"
#include "worker/tokenizer/hf_tokenizer.h"
#include "worker/tokenizer/normalizer.h"

namespace headroom::worker {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// A byte-level tokenizer: the 256 byte symbols as ids 0-255, then "he" (256), "ll" (257),
// "hell" (258), "hello" (259), "Ġworld" (260) by five merges, and `added` after them.
json ByteLevelTokenizer(json added = json::array()) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::Encode(std::string(1, static_cast<char>(b)))] = b;
  const std::string space = byte_level::Encode(" ");
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  vocab[space + "w"] = 260;
  vocab[space + "wo"] = 261;
  vocab[space + "world"] = 262;
  vocab["wo"] = 263;
  return json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", R"( ?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", json::array({json{"h", "e"}, json{"l", "l"}, json{"he", "ll"}, json{"hell", "o"}, json{space, "w"},
                                json{space + "w", "o"}, json{"w", "o"}})}}}};
}

json Added(int id, const std::string& content, bool special, json options = json::object()) {
  json t{{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
         {"rstrip", false}, {"normalized", false}, {"special", special}};
  for (const auto& [k, v] : options.items()) t[k] = v;
  return t;
}

struct TokenizerDir {
  testing::TempDir dir{"headroom-tokenizer"};
  explicit TokenizerDir(const json& tokenizer, const std::string& config = "") {
    std::ofstream(fs::path(dir.path()) / "tokenizer.json") << tokenizer.dump();
    if (!config.empty()) std::ofstream(fs::path(dir.path()) / "tokenizer_config.json") << config;
  }
  HfTokenizer Load() const { return HfTokenizer::Load(dir.path()); }
};

std::string LoadError(const json& tokenizer, const std::string& config = "") {
  TokenizerDir d(tokenizer, config);
  try {
    d.Load();
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "loaded";
}

TEST(HfTokenizer, EncodesWithMergesAndDecodesBack) {
  const TokenizerDir d(ByteLevelTokenizer());
  const HfTokenizer t = d.Load();
  // "hello" merges whole; " world" goes as far as the merges reach (Ġwo), then r l d.
  EXPECT_EQ(t.Encode("hello world"), (std::vector<int64_t>{259, 261, 'r', 'l', 'd'}));
  EXPECT_EQ(t.Decode(t.Encode("hello world")), "hello world");
  EXPECT_EQ(t.Decode(t.Encode("naïve café 日本 🤗\n\t x")), "naïve café 日本 🤗\n\t x");
  EXPECT_EQ(t.vocab_size(), 264);
  EXPECT_EQ(t.TokenId("hello"), 259);
  EXPECT_EQ(t.TokenText(258), "hell");
  EXPECT_FALSE(t.TokenId("nope").has_value());
  EXPECT_FALSE(t.TokenText(264).has_value());
  EXPECT_TRUE(t.Encode("").empty());
}

TEST(HfTokenizer, NfcComposesBeforeBpe) {
  const HfTokenizer t = TokenizerDir(ByteLevelTokenizer()).Load();
  EXPECT_EQ(t.Encode("cafe\u0301"), t.Encode("caf\u00E9"));
}

TEST(HfTokenizer, SpecialTokensInTheTextAreOneIdAndSkippableWhenDecoding) {
  const HfTokenizer t =
      TokenizerDir(ByteLevelTokenizer({Added(264, "<|end|>", true), Added(265, "<think>", false)})).Load();
  const auto ids = t.Encode("hello<|end|><think>hello");
  EXPECT_EQ(ids, (std::vector<int64_t>{259, 264, 265, 259}));
  EXPECT_EQ(t.Decode(ids), "hello<|end|><think>hello");
  EXPECT_EQ(t.Decode(ids, /*skip_special=*/true), "hello<think>hello");
  EXPECT_EQ(t.vocab_size(), 266);
  EXPECT_EQ(t.TokenId("<|end|>"), 264);
  EXPECT_EQ(t.TokenText(265), "<think>");
  try {
    t.Decode({1, 266});
    FAIL() << "decoded an unknown id";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("266"), std::string::npos) << e.what();
  }
}

TEST(HfTokenizer, TheLongestAddedTokenWinsWhereTwoStartTogether) {
  const HfTokenizer t = TokenizerDir(ByteLevelTokenizer({Added(264, "<a>", true), Added(265, "<a><b>", true)})).Load();
  EXPECT_EQ(t.Encode("<a><b><a>"), (std::vector<int64_t>{265, 264}));
}

// tokenizers' added_vocabulary.rs tests, with the Lowercase normalizer they use left out and
// their inputs written lower case: the splits must be the same.
using Splits = std::vector<std::pair<std::string, std::optional<int64_t>>>;
Splits SplitsOf(const AddedVocabulary& v, const std::string& text) {
  Splits out;
  for (const auto& piece : v.Split(text, /*normalized_pass=*/true)) out.emplace_back(std::string(piece.text), piece.id);
  return out;
}

AddedVocabulary Vocabulary(json added) {
  static const auto empty_model =
      BpeModel::FromJson(json{{"type", "BPE"}, {"vocab", json::object()}, {"merges", json::array()}}, "t");
  for (auto& t : added) t.erase("id");
  return AddedVocabulary::FromJson(added, *empty_model, Normalizer(), "t");
}

TEST(AddedVocabulary, StripAndSingleWordOptionsAsTokenizersTestsThem) {
  const json normalized{{"normalized", true}};
  const auto v = Vocabulary({Added(0, "my", false, {{"normalized", true}, {"lstrip", true}, {"rstrip", true}}),
                             Added(1, "name", false, normalized),
                             Added(2, "ony", false, {{"normalized", true}, {"single_word", true}}),
                             Added(3, "[CLS]", true, normalized), Added(4, "[SEP]", true, normalized)});
  EXPECT_EQ(SplitsOf(v, "[CLS] my name is anthony [SEP]"),
            (Splits{{"[CLS]", 3}, {" my ", 0}, {"name", 1}, {" is anthony ", std::nullopt}, {"[SEP]", 4}}));
}

TEST(AddedVocabulary, SingleWordLooksAtUnicodeWordCharacters) {
  const auto v = Vocabulary({Added(0, "<mask>", false, {{"normalized", true}, {"single_word", true}})});
  EXPECT_EQ(SplitsOf(v, "<mask> my name <mask> a<mask> <mask>ony <mask>"),
            (Splits{{"<mask>", 0},
                    {" my name ", std::nullopt},
                    {"<mask>", 0},
                    {" a<mask> <mask>ony ", std::nullopt},
                    {"<mask>", 0}}));
  // Punctuation is not a word character; a combining mark is.
  EXPECT_EQ(SplitsOf(v, "<mask>, <mask>- \u25CC\u0330<mask>"),
            (Splits{{"<mask>", 0}, {", ", std::nullopt}, {"<mask>", 0}, {"- \u25CC\u0330<mask>", std::nullopt}}));
}

TEST(AddedVocabulary, StripTakesUnicodeSpacesWithoutOverlapping) {
  const auto v = Vocabulary(
      {Added(0, "<mask>", false, {{"normalized", true}, {"lstrip", true}, {"rstrip", true}, {"single_word", true}})});
  EXPECT_EQ(
      SplitsOf(v, "hi <mask> there\t<mask>\t<mask>\u2000"),
      (Splits{{"hi", std::nullopt}, {" <mask> ", 0}, {"there", std::nullopt}, {"\t<mask>\t", 0}, {"<mask>\u2000", 0}}));
}

TEST(AddedVocabulary, IdsAreAssignedAsTokenizersAssignsThem) {
  // Declared ids that tokenizers would not give are refused: the file would mean otherwise.
  json tokenizer = ByteLevelTokenizer({Added(300, "<x>", true)});
  const std::string error = LoadError(tokenizer);
  EXPECT_NE(error.find("added_tokens[0].id"), std::string::npos) << error;
  // A content already in the vocabulary keeps its vocabulary id.
  const HfTokenizer t = TokenizerDir(ByteLevelTokenizer({Added(259, "hello", true)})).Load();
  EXPECT_EQ(t.Encode("hello"), (std::vector<int64_t>{259}));
  EXPECT_EQ(t.Decode({259}, /*skip_special=*/true), "");
}

TEST(HfTokenizer, ReadsTheSpecialTokenNamesFromTokenizerConfig) {
  const TokenizerDir d(ByteLevelTokenizer(),
                       R"({"eos_token": "<|im_end|>", "pad_token": {"content": "<|endoftext|>", "lstrip": false},
                           "bos_token": null, "chat_template": "{{ messages }}"})");
  const HfTokenizer t = d.Load();
  EXPECT_EQ(t.eos_token(), "<|im_end|>");
  EXPECT_EQ(t.pad_token(), "<|endoftext|>");
  EXPECT_FALSE(t.bos_token().has_value());
  const HfTokenizer none = TokenizerDir(ByteLevelTokenizer()).Load();
  EXPECT_FALSE(none.eos_token().has_value());
}

TEST(HfTokenizer, RefusesWhatItDoesNotSupportNamingFileAndField) {
  const auto expect_error = [](const std::string& error, const std::string& field) {
    EXPECT_NE(error.find("tokenizer.json"), std::string::npos) << error;
    EXPECT_NE(error.find(field), std::string::npos) << error;
  };
  json t = ByteLevelTokenizer();
  t["model"]["type"] = "Unigram";
  expect_error(LoadError(t), "model.type");
  t = ByteLevelTokenizer();
  t["model"]["byte_fallback"] = true;
  expect_error(LoadError(t), "model.byte_fallback");
  t = ByteLevelTokenizer();
  t["normalizer"] = {{"type", "Lowercase"}};
  expect_error(LoadError(t), "normalizer.type");
  t = ByteLevelTokenizer();
  t["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_error(LoadError(t), "pre_tokenizer.type");
  t = ByteLevelTokenizer();
  t["decoder"] = {{"type", "Metaspace"}};
  expect_error(LoadError(t), "decoder.type");
  t = ByteLevelTokenizer();
  t["truncation"] = {{"max_length", 8}};
  expect_error(LoadError(t), "truncation");
  t = ByteLevelTokenizer();
  t.erase("model");
  expect_error(LoadError(t), "model");
}

TEST(HfTokenizer, NamesTheFileThatIsNotJsonOrMissing) {
  testing::TempDir dir("headroom-tokenizer");
  std::string error;
  try {
    HfTokenizer::Load(dir.path());
  } catch (const TokenizerError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("tokenizer.json"), std::string::npos) << error;
  std::ofstream(fs::path(dir.path()) / "tokenizer.json") << "{\"model\": ";
  error.clear();
  try {
    HfTokenizer::Load(dir.path());
  } catch (const TokenizerError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find((fs::path(dir.path()) / "tokenizer.json").string() + ": not valid JSON"), std::string::npos)
      << error;
  error = LoadError(ByteLevelTokenizer(), "{not json");
  EXPECT_NE(error.find("tokenizer_config.json: not valid JSON"), std::string::npos) << error;
  error = LoadError(ByteLevelTokenizer(), R"({"eos_token": 7})");
  EXPECT_NE(error.find("tokenizer_config.json: eos_token"), std::string::npos) << error;
}

TEST(HfTokenizer, RefusesTextThatIsNotUtf8) {
  const HfTokenizer t = TokenizerDir(ByteLevelTokenizer()).Load();
  EXPECT_THROW(t.Encode("bad \xC3"), TokenizerError);
}

}  // namespace
}  // namespace headroom::worker
