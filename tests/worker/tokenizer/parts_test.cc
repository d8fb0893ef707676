// The pieces of worker/tokenizer/ one by one, on inputs small enough to reason about: the
// byte-level alphabet, UTF-8 decoding as Rust does it, the Oniguruma-compatible regex, the
// pre-tokenizer's split behaviours, the normalizer, and BPE merging by rank. The whole
// tokenizer against Hugging Face `tokenizers` itself is conformance_test.cc.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/tokenizer/bpe_model.h"
#include "worker/tokenizer/byte_level.h"
#include "worker/tokenizer/hf_tokenizer.h"
#include "worker/tokenizer/normalizer.h"
#include "worker/tokenizer/pre_tokenizer.h"
#include "worker/tokenizer/split_regex.h"
#include "worker/tokenizer/utf8.h"

namespace headroom::worker {
namespace {
using nlohmann::json;

// Qwen3's Split pattern, as its tokenizer.json writes it.
const char* kQwenPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> Matches(const SplitRegex& re, const std::string& text) {
  std::vector<std::string> out;
  for (const auto& [start, end] : re.FindAll(text)) out.push_back(text.substr(start, end - start));
  return out;
}

TEST(ByteLevel, EveryByteHasItsOwnPrintableSymbolAndComesBack) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string encoded = byte_level::Encode(all);
  std::set<char32_t> symbols;
  for (std::size_t pos = 0; pos < encoded.size();) {
    const char32_t c = utf8::Next(encoded, pos);
    EXPECT_FALSE(utf8::IsWhitespace(c)) << static_cast<uint32_t>(c);
    EXPECT_GE(static_cast<uint32_t>(c), uint32_t{'!'});
    symbols.insert(c);
  }
  EXPECT_EQ(symbols.size(), 256u);
  std::string decoded;
  byte_level::DecodeAppend(encoded, decoded);
  EXPECT_EQ(decoded, all);
  // Printable ASCII is itself; the space and newline are GPT-2's well-known Ġ and Ċ.
  EXPECT_EQ(byte_level::Encode("Az~!"), "Az~!");
  EXPECT_EQ(byte_level::Encode(" \n"), "\u0120\u010A");
}

TEST(ByteLevel, ATokenOutsideTheAlphabetDecodesAsItsOwnBytes) {
  std::string bytes;
  byte_level::DecodeAppend("\u0120a", bytes);
  byte_level::DecodeAppend("日本", bytes);      // not alphabet symbols: copied as they are
  byte_level::DecodeAppend("\u0120日", bytes);  // one symbol outside: the whole token as written
  EXPECT_EQ(bytes, " a日本\u0120日");
}

TEST(Utf8, InvalidBytesBecomeOneReplacementPerMaximalSubpart) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8::Lossy("ok"), "ok");
  EXPECT_EQ(utf8::Lossy("a\xF0\x9F\x98"), "a" + r);   // a truncated 4-byte sequence: one
  EXPECT_EQ(utf8::Lossy("\xC0\x80"), r + r);          // never-valid lead bytes: one each
  EXPECT_EQ(utf8::Lossy("\xED\xA0\x80"), r + r + r);  // a surrogate: its lead cannot go on
  EXPECT_EQ(utf8::Lossy("\xE2\x82x"), r + "x");       // cut short by an ASCII byte
  EXPECT_EQ(utf8::Lossy("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
  EXPECT_TRUE(utf8::IsValid("héllo 🤗"));
  EXPECT_FALSE(utf8::IsValid("\xC3"));
  EXPECT_FALSE(utf8::IsValid("\xED\xA0\x80"));
}

TEST(SplitRegex, QwenPatternCutsWordsNumbersAndSpacesAsTheModelExpects) {
  const SplitRegex re(kQwenPattern, false, "test");
  EXPECT_EQ(Matches(re, "Hello, world! I'M 2024"),
            (std::vector<std::string>{"Hello", ",", " world", "!", " I", "'M", " ", "2", "0", "2", "4"}));
  // Spaces before a word go with the word except the last one; newlines run together.
  EXPECT_EQ(Matches(re, "a   b\n\n c"), (std::vector<std::string>{"a", "  ", " b", "\n\n", " c"}));
  EXPECT_EQ(Matches(re, "x  "), (std::vector<std::string>{"x", "  "}));
  EXPECT_EQ(Matches(re, "日本語テキスト"), (std::vector<std::string>{"日本語テキスト"}));
}

TEST(SplitRegex, BackslashSIsOnigurumasWhiteSpace) {
  const SplitRegex space(R"(\s+)", false, "test");
  EXPECT_EQ(Matches(space, "a\u0085b\u3000c"), (std::vector<std::string>{"\u0085", "\u3000"}));
  // U+180E has not been White_Space since Unicode 6.3; PCRE2's own \s still matches it.
  EXPECT_TRUE(Matches(space, "a\u180Eb").empty());
  const SplitRegex not_space(R"([^\s\p{L}]+)", false, "test");
  EXPECT_EQ(Matches(not_space, "a\u0085!?"), (std::vector<std::string>{"!?"}));
}

TEST(SplitRegex, AnEmptyMatchRightAfterAMatchIsSkippedAsOnigurumaDoes) {
  const SplitRegex re("a*", false, "test");
  // Oniguruma's find_iter: "a" at 0, then empty matches at 2 and 3 ("b" and the end).
  const auto m = re.FindAll("abc");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0], (std::pair<std::size_t, std::size_t>{0, 1}));
  EXPECT_EQ(m[1], (std::pair<std::size_t, std::size_t>{2, 2}));
  EXPECT_EQ(m[2], (std::pair<std::size_t, std::size_t>{3, 3}));
}

TEST(SplitRegex, RefusesWhatPcre2WouldReadDifferently) {
  EXPECT_THROW(SplitRegex(R"(\h+)", false, "f: pattern"), TokenizerError);
  EXPECT_THROW(SplitRegex(R"([^\S])", false, "f: pattern"), TokenizerError);
  try {
    SplitRegex("(unclosed", false, "tokenizer.json: pre_tokenizer.pattern.Regex");
    FAIL() << "compiled";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("pre_tokenizer.pattern.Regex"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Matches(SplitRegex("a.b", true, "f"), "aXb a.b"), (std::vector<std::string>{"a.b"}));
}

// The expectations are tokenizers' own (pre_tokenizers/split.rs, its `basic` test).
TEST(PreTokenizer, SplitBehavioursMatchTokenizers) {
  const auto split = [](const char* behavior, bool invert = false) {
    return PreTokenizer::FromJson(
               json{{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", behavior}, {"invert", invert}}, "t")
        .Split("How are you doing?");
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("Removed"), (V{"How", "are", "you", "doing?"}));
  EXPECT_EQ(split("Isolated"), (V{"How", " ", "are", " ", "you", " ", "doing?"}));
  EXPECT_EQ(split("MergedWithPrevious"), (V{"How ", "are ", "you ", "doing?"}));
  EXPECT_EQ(split("MergedWithNext"), (V{"How", " are", " you", " doing?"}));
  EXPECT_EQ(split("Contiguous"), (V{"How", " ", "are", " ", "you", " ", "doing?"}));
  EXPECT_EQ(split("Removed", true), (V{" ", " ", " "}));
}

TEST(PreTokenizer, ByteLevelMapsEveryPieceAndCanUseGpt2sRegex) {
  const json sequence{
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", kQwenPattern}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
  const auto qwen = PreTokenizer::FromJson(sequence, "t");
  EXPECT_EQ(qwen.Split("a  b\n"), (std::vector<std::string>{"a", "\u0120", "\u0120b", "\u010A"}));
  const auto gpt2 =
      PreTokenizer::FromJson(json{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}, "t");
  EXPECT_EQ(gpt2.Split("Hi there"), (std::vector<std::string>{"\u0120Hi", "\u0120there"}));
  EXPECT_TRUE(gpt2.Split("").empty());
}

TEST(PreTokenizer, RefusesUnknownTypesNamingTheField) {
  try {
    PreTokenizer::FromJson(json{{"type", "Sequence"}, {"pretokenizers", {{{"type", "Metaspace"}}}}},
                           "tokenizer.json: pre_tokenizer");
    FAIL() << "accepted Metaspace";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("pre_tokenizer.pretokenizers[0].type"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Metaspace"), std::string::npos) << e.what();
  }
}

TEST(Normalizer, NfcComposesAndSequencesApplyInOrder) {
  const auto nfc = Normalizer::FromJson(json{{"type", "NFC"}}, "t");
  EXPECT_EQ(nfc.Apply("e\u0301"), "\u00E9");
  const auto nfd_then_nfc =
      Normalizer::FromJson(json{{"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, {{"type", "NFC"}}}}}, "t");
  EXPECT_EQ(nfd_then_nfc.Apply("\u00E9"), "\u00E9");
  EXPECT_EQ(Normalizer::FromJson(json{{"type", "NFKC"}}, "t").Apply("\uFB01"), "fi");
  EXPECT_TRUE(Normalizer::FromJson(json(), "t").empty());
  EXPECT_THROW(Normalizer::FromJson(json{{"type", "Lowercase"}}, "t"), TokenizerError);
}

json ToyBpe(json merges, bool ignore_merges = false) {
  return json{{"type", "BPE"},
              {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}, {"<unk>", 6}, {"cc", 7}}},
              {"merges", merges},
              {"ignore_merges", ignore_merges}};
}

std::vector<int64_t> Tokenize(const BpeModel& model, const std::string& word) {
  std::vector<int64_t> ids;
  model.Tokenize(word, ids);
  return ids;
}

TEST(BpeModel, MergesLowestRankFirst) {
  // "a b" ranks before "b c": abc -> ab c -> abc.
  const auto ab_first = BpeModel::FromJson(ToyBpe({"a b", "b c", "ab c"}), "t");
  EXPECT_EQ(Tokenize(*ab_first, "abc"), (std::vector<int64_t>{5}));
  // "b c" first: abc -> a bc, and no merge joins a with bc.
  const auto bc_first = BpeModel::FromJson(ToyBpe(json::array({json{"b", "c"}, json{"a", "b"}})), "t");
  EXPECT_EQ(Tokenize(*bc_first, "abc"), (std::vector<int64_t>{0, 4}));
  // Equal candidates: the leftmost pair merges first (ccc -> cc c).
  const auto cc = BpeModel::FromJson(ToyBpe({"c c"}), "t");
  EXPECT_EQ(Tokenize(*cc, "ccc"), (std::vector<int64_t>{7, 2}));
  EXPECT_EQ(Tokenize(*cc, "cccc"), (std::vector<int64_t>{7, 7}));
}

TEST(BpeModel, IgnoreMergesEmitsAWordInTheVocabularyWhole) {
  const auto plain = BpeModel::FromJson(ToyBpe({"a b"}), "t");
  EXPECT_EQ(Tokenize(*plain, "abc"), (std::vector<int64_t>{3, 2}));
  const auto ignoring = BpeModel::FromJson(ToyBpe({"a b"}, true), "t");
  EXPECT_EQ(Tokenize(*ignoring, "abc"), (std::vector<int64_t>{5}));
  EXPECT_EQ(Tokenize(*ignoring, "abcc"), (std::vector<int64_t>{3, 2, 2}));
}

TEST(BpeModel, UnknownCharactersBecomeUnkOrAreDropped) {
  auto spec = ToyBpe({"a b"});
  // Dropped, the x's leave a and b side by side, and they merge.
  EXPECT_EQ(Tokenize(*BpeModel::FromJson(spec, "t"), "axxb"), (std::vector<int64_t>{3}));
  spec["unk_token"] = "<unk>";
  EXPECT_EQ(Tokenize(*BpeModel::FromJson(spec, "t"), "axxb"), (std::vector<int64_t>{0, 6, 6, 1}));
  spec["fuse_unk"] = true;
  EXPECT_EQ(Tokenize(*BpeModel::FromJson(spec, "t"), "axxb"), (std::vector<int64_t>{0, 6, 1}));
}

TEST(BpeModel, RefusesWhatItCannotEncodeExactly) {
  const auto message = [](json spec) {
    try {
      BpeModel::FromJson(spec, "tokenizer.json: model");
    } catch (const TokenizerError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  auto spec = ToyBpe({"a b"});
  spec["type"] = "WordPiece";
  EXPECT_NE(message(spec).find("model.type"), std::string::npos) << message(spec);
  spec = ToyBpe({"a b"});
  spec["byte_fallback"] = true;
  EXPECT_NE(message(spec).find("model.byte_fallback"), std::string::npos) << message(spec);
  spec = ToyBpe({"a b"});
  spec["dropout"] = 0.1;
  EXPECT_NE(message(spec).find("model.dropout"), std::string::npos) << message(spec);
  EXPECT_NE(message(ToyBpe({"a x"})).find("model.merges[0]"), std::string::npos);
  EXPECT_NE(message(ToyBpe({"a b c"})).find("model.merges[0]"), std::string::npos);
  EXPECT_NE(message(ToyBpe({"a c"})).find("\"ac\""), std::string::npos);  // merged token missing
}

}  // namespace
}  // namespace headroom::worker
