// tokenizer.json's "model" when it is BPE: the vocabulary, the merges ranked by their order
// in the file ("a b" strings or [a, b] lists), and how a word becomes ids: when
// ignore_merges is set a word that is itself in the vocabulary is one id; otherwise its
// characters are merged pairwise, lowest rank first (leftmost among equal ranks), exactly
// as `tokenizers`' Word::merge_all does. Refused at load: another model type, byte_fallback,
// a non-zero dropout (it makes encoding random).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace headroom::worker {

class BpeModel {
 public:
  // `spec` is tokenizer.json's "model"; `where` names the file and field for errors.
  static std::unique_ptr<BpeModel> FromJson(const nlohmann::json& spec, const std::string& where);

  // Appends the ids of one pre-tokenized word (non-empty, in the vocabulary's alphabet).
  // Characters not in the vocabulary become unk_token, or are dropped when there is none.
  void Tokenize(std::string_view word, std::vector<int64_t>& ids) const;

  std::optional<int64_t> TokenId(std::string_view token) const;
  const std::string* TokenText(int64_t id) const;     // nullptr when no vocabulary entry has `id`
  std::size_t size() const { return vocab_.size(); }  // entries, as tokenizers counts them
  int64_t max_id() const { return static_cast<int64_t>(text_of_id_.size()) - 1; }

 private:
  // `vocab` (token -> id) and `merges` (in rank order) of the model object at `where`.
  void ReadVocab(const nlohmann::json& spec, const std::string& where);
  void ReadMerges(const nlohmann::json& spec, const std::string& where);
  struct Merge {
    uint32_t rank;
    uint32_t new_id;
  };
  static uint64_t PairKey(uint32_t left, uint32_t right) { return (uint64_t{left} << 32) | right; }
  std::vector<uint32_t> MergeWord(std::string_view word) const;

  std::unordered_map<std::string, uint32_t> vocab_;
  std::vector<std::string> text_of_id_;
  std::vector<bool> has_id_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<uint32_t> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;

  // Words already merged (a text repeats most of its words); bounded like tokenizers' cache.
  static constexpr std::size_t kCacheCapacity = 10000;
  static constexpr std::size_t kCacheMaxWordBytes = 256;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<uint32_t>> cache_;
};

}  // namespace headroom::worker
