#include "worker/tokenizer/normalizer.h"

#include <cstdlib>
#include <memory>

#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include "worker/tokenizer/hf_tokenizer.h"

namespace headroom::worker {
namespace {

std::string TypeOf(const nlohmann::json& spec, const std::string& where) {
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    throw TokenizerError(where + ": expected an object with a string \"type\"");
  }
  return spec["type"].get<std::string>();
}

}  // namespace

Normalizer Normalizer::FromJson(const nlohmann::json& spec, const std::string& where) {
  Normalizer n;
  if (spec.is_null()) return n;
  const std::string type = TypeOf(spec, where);
  if (type == "Sequence") {
    if (!spec.contains("normalizers") || !spec["normalizers"].is_array()) {
      throw TokenizerError(where + ".normalizers: expected a list");
    }
    for (std::size_t i = 0; i < spec["normalizers"].size(); ++i) {
      const Normalizer step = FromJson(spec["normalizers"][i], where + ".normalizers[" + std::to_string(i) + "]");
      n.forms_.insert(n.forms_.end(), step.forms_.begin(), step.forms_.end());
    }
    return n;
  }
  if (type == "NFC") {
    n.forms_.push_back(Form::kNfc);
  } else if (type == "NFD") {
    n.forms_.push_back(Form::kNfd);
  } else if (type == "NFKC") {
    n.forms_.push_back(Form::kNfkc);
  } else if (type == "NFKD") {
    n.forms_.push_back(Form::kNfkd);
  } else {
    throw TokenizerError(where + ".type: normalizer \"" + type +
                         "\" is not supported (supported: NFC, NFD, NFKC, NFKD, Sequence, null)");
  }
  return n;
}

std::string Normalizer::Apply(std::string_view text) const {
  std::string current(text);
  for (Form form : forms_) {
    int options = UTF8PROC_STABLE;
    switch (form) {
      case Form::kNfc: options |= UTF8PROC_COMPOSE; break;
      case Form::kNfd: options |= UTF8PROC_DECOMPOSE; break;
      case Form::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
      case Form::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t* result = nullptr;
    const utf8proc_ssize_t length =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(current.data()),
                     static_cast<utf8proc_ssize_t>(current.size()), &result, static_cast<utf8proc_option_t>(options));
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(result, &std::free);
    if (length < 0) throw TokenizerError(std::string("normalizer: ") + utf8proc_errmsg(length));
    current.assign(reinterpret_cast<const char*>(result), static_cast<std::size_t>(length));
  }
  return current;
}

}  // namespace headroom::worker
