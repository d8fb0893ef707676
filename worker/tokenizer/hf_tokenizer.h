// A Hugging Face byte-level BPE tokenizer read from tokenizer.json, encoding and decoding
// exactly as the `tokenizers` library does for the models headroom fine-tunes (Qwen2/Qwen3,
// Llama 3): normalizer NFC / Sequence / none; pre-tokenizer Split (regex), ByteLevel or a
// Sequence of them; model BPE (merges as "a b" or [a, b], ignore_merges); decoder ByteLevel.
// Anything else is refused at Load with the file and field named, never encoded approximately.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace headroom::worker {

// An unusable tokenizer directory or id; the message names the file and the field.
class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class HfTokenizer {
 public:
  // Reads DIR/tokenizer.json (required) and DIR/tokenizer_config.json (optional: the eos,
  // pad and bos token names; its chat_template is not read here). Throws TokenizerError
  // naming the file and field for anything unsupported (a model other than BPE,
  // byte_fallback, an unknown normalizer, pre-tokenizer or decoder) or malformed.
  static HfTokenizer Load(const std::string& model_dir);

  // Token ids of `text`, no special tokens added. Added and special tokens written in the
  // text are recognised before BPE, honouring lstrip/rstrip/single_word/normalized as
  // `tokenizers` does.
  std::vector<int64_t> Encode(const std::string& text) const;
  // Ids back to text; skip_special drops special added tokens. Unknown id: TokenizerError.
  std::string Decode(const std::vector<int64_t>& ids, bool skip_special = false) const;

  std::optional<int64_t> TokenId(const std::string& token) const;  // vocabulary or added token
  std::optional<std::string> TokenText(int64_t id) const;
  int64_t vocab_size() const;  // highest id + 1, added tokens included

  // From tokenizer_config.json when present: "eos_token", "pad_token", "bos_token" (a string
  // or {"content": ...}); nullopt when absent or null.
  std::optional<std::string> eos_token() const;
  std::optional<std::string> pad_token() const;
  std::optional<std::string> bos_token() const;

 private:
  struct Impl;
  explicit HfTokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;  // immutable once loaded: copies share it
};

}  // namespace headroom::worker
