#include "worker/tokenizer/bpe_model.h"

#include <queue>

#include <nlohmann/json.hpp>

#include "worker/tokenizer/hf_tokenizer.h"
#include "worker/tokenizer/utf8.h"

namespace headroom::worker {
namespace {

std::string OptionalString(const nlohmann::json& spec, const char* name, const std::string& where) {
  if (!spec.contains(name) || spec[name].is_null()) return "";
  if (!spec[name].is_string()) throw TokenizerError(where + "." + name + ": expected a string or null");
  return spec[name].get<std::string>();
}

bool OptionalBool(const nlohmann::json& spec, const char* name, const std::string& where) {
  if (!spec.contains(name) || spec[name].is_null()) return false;
  if (!spec[name].is_boolean()) throw TokenizerError(where + "." + name + ": expected true or false");
  return spec[name].get<bool>();
}

}  // namespace

void BpeModel::ReadVocab(const nlohmann::json& spec, const std::string& where) {
  if (!spec.contains("vocab") || !spec["vocab"].is_object()) {
    throw TokenizerError(where + ".vocab: expected an object of token: id");
  }
  const auto& vocab = spec["vocab"];
  vocab_.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > 0x7FFFFFFF) {
      throw TokenizerError(where + ".vocab[\"" + token + "\"]: expected a non-negative integer id");
    }
    const auto value = static_cast<uint32_t>(id.get<int64_t>());
    vocab_[token] = value;
    if (value >= text_of_id_.size()) {
      text_of_id_.resize(value + 1);
      has_id_.resize(value + 1, false);
    }
    text_of_id_[value] = token;
    has_id_[value] = true;
  }
}

void BpeModel::ReadMerges(const nlohmann::json& spec, const std::string& where) {
  if (!spec.contains("merges") || !spec["merges"].is_array()) {
    throw TokenizerError(where + ".merges: expected a list of \"a b\" strings or [a, b] pairs");
  }
  const auto& merges = spec["merges"];
  merges_.reserve(merges.size());
  const std::size_t prefix_length = continuing_subword_prefix_.size();
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& m = merges[rank];
    const std::string at = where + ".merges[" + std::to_string(rank) + "]";
    std::string left, right;
    if (m.is_string()) {
      const std::string line = m.get<std::string>();
      const std::size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        throw TokenizerError(at + ": \"" + line + "\" is not two tokens separated by one space");
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      throw TokenizerError(at + ": expected \"a b\" or [\"a\", \"b\"]");
    }
    const auto left_id = vocab_.find(left);
    const auto right_id = vocab_.find(right);
    if (left_id == vocab_.end()) throw TokenizerError(at + ": \"" + left + "\" is not in the vocab");
    if (right_id == vocab_.end()) throw TokenizerError(at + ": \"" + right + "\" is not in the vocab");
    if (right.size() < prefix_length) {
      throw TokenizerError(at + ": \"" + right + "\" is shorter than continuing_subword_prefix");
    }
    const std::string merged = left + right.substr(prefix_length);
    const auto merged_id = vocab_.find(merged);
    if (merged_id == vocab_.end()) {
      throw TokenizerError(at + ": the merged token \"" + merged + "\" is not in the vocab");
    }
    // A pair listed twice keeps its last rank, as a map built from the list does.
    merges_[PairKey(left_id->second, right_id->second)] = {static_cast<uint32_t>(rank), merged_id->second};
  }
}

std::unique_ptr<BpeModel> BpeModel::FromJson(const nlohmann::json& spec, const std::string& where) {
  if (!spec.is_object()) throw TokenizerError(where + ": expected an object");
  if (spec.contains("type")) {
    if (!spec["type"].is_string()) throw TokenizerError(where + ".type: expected a string");
    const std::string type = spec["type"].get<std::string>();
    if (type != "BPE") {
      throw TokenizerError(where + ".type: model \"" + type + "\" is not supported (only BPE)");
    }
  }
  if (OptionalBool(spec, "byte_fallback", where)) {
    throw TokenizerError(where + ".byte_fallback: true is not supported (byte-level BPE only)");
  }
  if (spec.contains("dropout") && !spec["dropout"].is_null()) {
    if (!spec["dropout"].is_number()) throw TokenizerError(where + ".dropout: expected a number or null");
    if (spec["dropout"].get<double>() != 0.0) {
      throw TokenizerError(where + ".dropout: a non-zero dropout makes encoding random; not supported");
    }
  }
  auto model = std::unique_ptr<BpeModel>(new BpeModel());
  model->fuse_unk_ = OptionalBool(spec, "fuse_unk", where);
  model->ignore_merges_ = OptionalBool(spec, "ignore_merges", where);
  model->continuing_subword_prefix_ = OptionalString(spec, "continuing_subword_prefix", where);
  model->end_of_word_suffix_ = OptionalString(spec, "end_of_word_suffix", where);

  model->ReadVocab(spec, where);

  const std::string unk = OptionalString(spec, "unk_token", where);
  if (!unk.empty()) {
    const auto it = model->vocab_.find(unk);
    if (it == model->vocab_.end()) throw TokenizerError(where + ".unk_token: \"" + unk + "\" is not in the vocab");
    model->unk_id_ = it->second;
  }

  model->ReadMerges(spec, where);
  return model;
}

std::optional<int64_t> BpeModel::TokenId(std::string_view token) const {
  const auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::TokenText(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(text_of_id_.size()) || !has_id_[id]) return nullptr;
  return &text_of_id_[id];
}

std::vector<uint32_t> BpeModel::MergeWord(std::string_view word) const {
  struct Symbol {
    uint32_t id;
    int prev;
    int next;
    bool removed;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  int64_t pending_unk = -1;  // the unknown-token id of a run not yet added (fuse_unk)
  std::string piece;
  for (std::size_t pos = 0; pos < word.size();) {
    const std::size_t start = pos;
    utf8::Next(word, pos);
    piece.assign(word.substr(start, pos - start));
    if (start > 0) piece.insert(0, continuing_subword_prefix_);
    if (pos == word.size()) piece += end_of_word_suffix_;
    const auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      if (pending_unk >= 0) symbols.push_back({static_cast<uint32_t>(pending_unk), 0, 0, false});
      pending_unk = -1;
      symbols.push_back({it->second, 0, 0, false});
    } else if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) symbols.push_back({static_cast<uint32_t>(pending_unk), 0, 0, false});
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk >= 0) symbols.push_back({static_cast<uint32_t>(pending_unk), 0, 0, false});
  const int n = static_cast<int>(symbols.size());
  for (int i = 0; i < n; ++i) {
    symbols[i].prev = i - 1;
    symbols[i].next = i + 1 < n ? i + 1 : -1;
  }

  struct Candidate {
    uint32_t rank;
    int pos;
    uint32_t new_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto consider = [&](int left) {
    const int right = symbols[left].next;
    if (right < 0) return;
    const auto it = merges_.find(PairKey(symbols[left].id, symbols[right].id));
    if (it != merges_.end()) queue.push({it->second.rank, left, it->second.new_id});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.removed || left.next < 0) continue;
    const int right_pos = left.next;
    // A stale entry: the pair at this position changed since it was queued.
    const auto it = merges_.find(PairKey(left.id, symbols[right_pos].id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;
    left.id = top.new_id;
    left.next = symbols[right_pos].next;
    symbols[right_pos].removed = true;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  std::vector<uint32_t> ids;
  for (int i = 0; i >= 0 && i < n; i = symbols[i].next) ids.push_back(symbols[i].id);
  return ids;
}

void BpeModel::Tokenize(std::string_view word, std::vector<int64_t>& ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const auto it = vocab_.find(std::string(word));
    if (it != vocab_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  std::string key(word);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(key);
    if (it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<uint32_t> merged = MergeWord(word);
  ids.insert(ids.end(), merged.begin(), merged.end());
  if (key.size() < kCacheMaxWordBytes) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::move(key), std::move(merged));
  }
}

}  // namespace headroom::worker
