// tokenizer.json's "normalizer": the Unicode normal forms (NFC, NFD, NFKC, NFKD, by
// utf8proc), a Sequence of them, or none. Other normalizers (Lowercase, Replace, Prepend,
// Precompiled, ...) are refused at load.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace headroom::worker {

class Normalizer {
 public:
  Normalizer() = default;  // none: text passes unchanged
  // `spec` is the JSON value (null allowed); `where` names the file and field for errors.
  static Normalizer FromJson(const nlohmann::json& spec, const std::string& where);

  bool empty() const { return forms_.empty(); }
  // `text` (valid UTF-8) normalised by every step in order.
  std::string Apply(std::string_view text) const;

 private:
  enum class Form { kNfc, kNfd, kNfkc, kNfkd };
  std::vector<Form> forms_;
};

}  // namespace headroom::worker
