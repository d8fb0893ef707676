#include "worker/tokenizer/added_vocabulary.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "worker/tokenizer/bpe_model.h"
#include "worker/tokenizer/hf_tokenizer.h"
#include "worker/tokenizer/normalizer.h"
#include "worker/tokenizer/utf8.h"

namespace headroom::worker {
namespace {

bool Flag(const nlohmann::json& token, const char* name, bool fallback, const std::string& where) {
  if (!token.contains(name)) return fallback;
  if (!token[name].is_boolean()) throw TokenizerError(where + "." + name + ": expected true or false");
  return token[name].get<bool>();
}

}  // namespace

void AddedVocabulary::Trie::Insert(std::string_view text, int token) {
  int node = 0;
  for (unsigned char b : text) {
    const auto it = nodes[node].children.find(b);
    if (it != nodes[node].children.end()) {
      node = it->second;
      continue;
    }
    nodes.push_back(Node{});
    const int child = static_cast<int>(nodes.size()) - 1;
    nodes[node].children[b] = child;
    node = child;
  }
  nodes[node].token = token;
  first_byte[static_cast<unsigned char>(text.front())] = true;
}

std::pair<int, std::size_t> AddedVocabulary::Trie::LongestAt(std::string_view text, std::size_t pos) const {
  std::pair<int, std::size_t> best{-1, 0};
  if (!first_byte[static_cast<unsigned char>(text[pos])]) return best;
  int node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto it = nodes[node].children.find(static_cast<unsigned char>(text[i]));
    if (it == nodes[node].children.end()) break;
    node = it->second;
    if (nodes[node].token >= 0) best = {nodes[node].token, i + 1 - pos};
  }
  return best;
}

AddedVocabulary AddedVocabulary::FromJson(const nlohmann::json& spec, const BpeModel& model,
                                          const Normalizer& normalizer, const std::string& where) {
  AddedVocabulary v;
  if (spec.is_null()) return v;
  if (!spec.is_array()) throw TokenizerError(where + ": expected a list");
  auto next_id = static_cast<int64_t>(model.size());
  for (std::size_t i = 0; i < spec.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const auto& t = spec[i];
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string()) {
      throw TokenizerError(at + ".content: expected a string");
    }
    AddedToken token;
    token.content = t["content"].get<std::string>();
    token.single_word = Flag(t, "single_word", false, at);
    token.lstrip = Flag(t, "lstrip", false, at);
    token.rstrip = Flag(t, "rstrip", false, at);
    token.normalized = Flag(t, "normalized", true, at);
    token.special = Flag(t, "special", false, at);
    if (token.content.empty()) continue;  // tokenizers ignores an empty one
    // As tokenizers assigns ids: an added token's or the vocabulary's id for a content
    // already there, else the next free one, counted from the vocabulary's entry count.
    const auto existing = v.id_of_content_.find(token.content);
    if (existing != v.id_of_content_.end()) {
      token.id = existing->second;
    } else if (const auto model_id = model.TokenId(token.content)) {
      token.id = *model_id;
    } else {
      token.id = next_id++;
    }
    if (t.contains("id")) {
      if (!t["id"].is_number_integer() || t["id"].get<int64_t>() < 0) {
        throw TokenizerError(at + ".id: expected a non-negative integer");
      }
      const auto declared = t["id"].get<int64_t>();
      if (declared != token.id) {
        throw TokenizerError(at + ".id: " + std::to_string(declared) + " is declared for \"" + token.content +
                             "\", but tokenizers would give it " + std::to_string(token.id));
      }
    }
    token.match_text = token.normalized ? normalizer.Apply(token.content) : token.content;
    v.id_of_content_[token.content] = token.id;
    if (token.special) v.special_contents_.insert(token.content);
    v.max_id_ = std::max(v.max_id_, token.id);
    const auto slot = v.token_of_id_.find(token.id);
    if (slot != v.token_of_id_.end()) {
      v.tokens_[slot->second] = std::move(token);  // a later entry for the same id replaces it
    } else {
      v.token_of_id_[token.id] = v.tokens_.size();
      v.tokens_.push_back(std::move(token));
    }
  }
  for (std::size_t i = 0; i < v.tokens_.size(); ++i) {
    const AddedToken& token = v.tokens_[i];
    if (token.match_text.empty()) continue;
    (token.normalized ? v.normalized_trie_ : v.raw_trie_).Insert(token.match_text, static_cast<int>(i));
  }
  return v;
}

std::vector<AddedVocabulary::Piece> AddedVocabulary::Split(std::string_view text, bool normalized_pass) const {
  const Trie& trie = normalized_pass ? normalized_trie_ : raw_trie_;
  std::vector<Piece> pieces;
  std::size_t start_offset = 0;  // end of the last piece taken
  std::size_t pos = 0;           // where the search for the next match resumes
  while (pos < text.size()) {
    const auto [index, length] = trie.LongestAt(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    std::size_t start = pos, stop = pos + length;
    pos = stop;  // the search goes on after the match itself, stripped whitespace or not
    if (token.single_word) {
      const bool word_before = start > 0 && utf8::IsWordCharacter(utf8::Previous(text, start));
      std::size_t after = stop;
      const bool word_after = stop < text.size() && utf8::IsWordCharacter(utf8::Next(text, after));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      std::size_t new_start = start;
      while (new_start > 0) {
        std::size_t before = new_start - 1;
        while (before > 0 && (static_cast<unsigned char>(text[before]) & 0xC0) == 0x80) --before;
        std::size_t probe = before;
        if (!utf8::IsWhitespace(utf8::Next(text, probe))) break;
        new_start = before;
      }
      start = std::max(new_start, start_offset);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        std::size_t next = stop;
        if (!utf8::IsWhitespace(utf8::Next(text, next))) break;
        stop = next;
      }
    }
    if (start_offset < start) pieces.push_back({std::nullopt, text.substr(start_offset, start - start_offset)});
    pieces.push_back({token.id, text.substr(start, stop - start)});
    start_offset = stop;
  }
  if (start_offset < text.size()) pieces.push_back({std::nullopt, text.substr(start_offset)});
  return pieces;
}

std::optional<int64_t> AddedVocabulary::TokenId(const std::string& content) const {
  const auto it = id_of_content_.find(content);
  if (it == id_of_content_.end()) return std::nullopt;
  return it->second;
}

const AddedToken* AddedVocabulary::TokenOfId(int64_t id) const {
  const auto it = token_of_id_.find(id);
  return it == token_of_id_.end() ? nullptr : &tokens_[it->second];
}

}  // namespace headroom::worker
