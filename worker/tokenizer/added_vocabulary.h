// tokenizer.json's "added_tokens": tokens matched in the text before any pre-tokenization,
// as `tokenizers`' AddedVocabulary does. Tokens with normalized=false are found in the raw
// text first; the rest of the text is then normalised and tokens with normalized=true are
// found in it (by their normalised form). Each pass takes the leftmost, then longest, match;
// single_word discards a match inside a word, lstrip/rstrip absorb the whitespace around it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace headroom::worker {

class BpeModel;
class Normalizer;

struct AddedToken {
  std::string content;
  int64_t id = 0;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
  std::string match_text;  // what is searched for: content, normalised when `normalized`
};

class AddedVocabulary {
 public:
  // Reads the "added_tokens" list. Ids are assigned as tokenizers assigns them (the model's
  // id for a content already in its vocabulary, else the next free one); a declared "id"
  // that differs is an error, since the file would then not mean what it says.
  static AddedVocabulary FromJson(const nlohmann::json& spec, const BpeModel& model, const Normalizer& normalizer,
                                  const std::string& where);

  // One stretch of text: an added token's id, or none for text to pre-tokenize.
  struct Piece {
    std::optional<int64_t> id;
    std::string_view text;
  };
  // `text` cut at the matches of the normalized=false (`normalized_pass` false) or
  // normalized=true tokens; empty stretches are dropped.
  std::vector<Piece> Split(std::string_view text, bool normalized_pass) const;

  std::optional<int64_t> TokenId(const std::string& content) const;
  const AddedToken* TokenOfId(int64_t id) const;
  bool IsSpecialContent(const std::string& text) const { return special_contents_.count(text) > 0; }
  int64_t max_id() const { return max_id_; }  // -1 when there are none

 private:
  // A byte trie over match_text: the longest token starting at each position.
  struct Trie {
    struct Node {
      std::unordered_map<unsigned char, int> children;
      int token = -1;  // index into tokens_
    };
    std::vector<Node> nodes{Node{}};
    bool first_byte[256] = {};
    void Insert(std::string_view text, int token);
    // Longest token matching at `pos`: (token, length), or token -1.
    std::pair<int, std::size_t> LongestAt(std::string_view text, std::size_t pos) const;
  };

  std::vector<AddedToken> tokens_;
  std::unordered_map<std::string, int64_t> id_of_content_;
  std::unordered_map<int64_t, std::size_t> token_of_id_;
  std::unordered_set<std::string> special_contents_;
  Trie raw_trie_;
  Trie normalized_trie_;
  int64_t max_id_ = -1;
};

}  // namespace headroom::worker
