#include "worker/tokenizer/hf_tokenizer.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/files/input_file.h"
#include "worker/tokenizer/added_vocabulary.h"
#include "worker/tokenizer/bpe_model.h"
#include "worker/tokenizer/byte_level.h"
#include "worker/tokenizer/normalizer.h"
#include "worker/tokenizer/pre_tokenizer.h"
#include "worker/tokenizer/utf8.h"

namespace headroom::worker {
namespace fs = std::filesystem;

struct HfTokenizer::Impl {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  AddedVocabulary added;
  bool byte_level_decoder = false;  // else tokens are joined with spaces, as with no decoder
  std::optional<std::string> eos_token, pad_token, bos_token;
};

namespace {

// tokenizer.json and tokenizer_config.json, each refused above its size limit before it is
// read (see core/files/input_file.h), and never waited on when it is a FIFO.
nlohmann::json ReadJson(const fs::path& file) {
  const bool vocabulary = file.filename() == "tokenizer.json";
  std::string text;
  try {
    text = files::ReadWholeFile(file.string(), vocabulary ? files::kMaxTokenizerFileBytes : files::kMaxJsonFileBytes,
                                vocabulary ? "a tokenizer.json" : "a JSON file");
  } catch (const files::InputFileError& e) {
    throw TokenizerError(e.what());
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw TokenizerError(file.string() + ": not valid JSON (" + e.what() + ")");
  }
}

void ReadDecoder(const nlohmann::json& spec, const std::string& where, bool& byte_level) {
  if (spec.is_null()) return;
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    throw TokenizerError(where + ": expected an object with a string \"type\"");
  }
  const std::string type = spec["type"].get<std::string>();
  if (type != "ByteLevel") {
    throw TokenizerError(where + ".type: decoder \"" + type + "\" is not supported (supported: ByteLevel, null)");
  }
  byte_level = true;
}

// tokenizer_config.json's "eos_token" and the like: a string, {"content": ...}, or absent.
std::optional<std::string> ConfigToken(const nlohmann::json& config, const char* name, const std::string& file) {
  if (!config.contains(name) || config[name].is_null()) return std::nullopt;
  const auto& v = config[name];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  throw TokenizerError(file + ": " + name + ": expected a string, {\"content\": ...} or null");
}

}  // namespace

HfTokenizer HfTokenizer::Load(const std::string& model_dir) {
  const fs::path file = fs::path(model_dir) / "tokenizer.json";
  const std::string name = file.string();
  const nlohmann::json j = ReadJson(file);
  if (!j.is_object()) throw TokenizerError(name + ": expected a JSON object");
  auto impl = std::make_shared<Impl>();
  for (const char* unsupported : {"truncation", "padding"}) {
    if (j.contains(unsupported) && !j[unsupported].is_null()) {
      throw TokenizerError(name + ": " + unsupported + ": only null is supported (encoding is never cut or padded)");
    }
  }
  if (!j.contains("model")) throw TokenizerError(name + ": model: missing");
  impl->normalizer = Normalizer::FromJson(j.value("normalizer", nlohmann::json()), name + ": normalizer");
  impl->pre_tokenizer = PreTokenizer::FromJson(j.value("pre_tokenizer", nlohmann::json()), name + ": pre_tokenizer");
  impl->model = BpeModel::FromJson(j["model"], name + ": model");
  ReadDecoder(j.value("decoder", nlohmann::json()), name + ": decoder", impl->byte_level_decoder);
  impl->added = AddedVocabulary::FromJson(j.value("added_tokens", nlohmann::json()), *impl->model, impl->normalizer,
                                          name + ": added_tokens");

  const fs::path config_file = fs::path(model_dir) / "tokenizer_config.json";
  if (fs::exists(config_file)) {
    const nlohmann::json config = ReadJson(config_file);
    if (!config.is_object()) throw TokenizerError(config_file.string() + ": expected a JSON object");
    impl->eos_token = ConfigToken(config, "eos_token", config_file.string());
    impl->pad_token = ConfigToken(config, "pad_token", config_file.string());
    impl->bos_token = ConfigToken(config, "bos_token", config_file.string());
  }
  return HfTokenizer(std::move(impl));
}

std::vector<int64_t> HfTokenizer::Encode(const std::string& text) const {
  if (!utf8::IsValid(text)) throw TokenizerError("the text to encode is not valid UTF-8");
  const Impl& t = *impl_;
  std::vector<int64_t> ids;
  for (const auto& raw : t.added.Split(text, /*normalized_pass=*/false)) {
    if (raw.id) {
      ids.push_back(*raw.id);
      continue;
    }
    const std::string normalized = t.normalizer.empty() ? std::string(raw.text) : t.normalizer.Apply(raw.text);
    for (const auto& piece : t.added.Split(normalized, /*normalized_pass=*/true)) {
      if (piece.id) {
        ids.push_back(*piece.id);
        continue;
      }
      for (const std::string& word : t.pre_tokenizer.Split(piece.text)) t.model->Tokenize(word, ids);
    }
  }
  return ids;
}

std::string HfTokenizer::Decode(const std::vector<int64_t>& ids, bool skip_special) const {
  const Impl& t = *impl_;
  std::string bytes;
  bool first = true;
  for (int64_t id : ids) {
    // As tokenizers decodes: an added token by the form it was matched in, else the vocabulary.
    const std::string* token = nullptr;
    if (const AddedToken* added = t.added.TokenOfId(id)) {
      token = &added->match_text;
    } else {
      token = t.model->TokenText(id);
    }
    if (!token) {
      throw TokenizerError("token id " + std::to_string(id) + " is not in the vocabulary (vocab_size " +
                           std::to_string(vocab_size()) + ")");
    }
    if (skip_special && t.added.IsSpecialContent(*token)) continue;
    if (t.byte_level_decoder) {
      byte_level::DecodeAppend(*token, bytes);
    } else {
      if (!first) bytes += ' ';
      bytes += *token;
    }
    first = false;
  }
  return t.byte_level_decoder ? utf8::Lossy(bytes) : bytes;
}

std::optional<int64_t> HfTokenizer::TokenId(const std::string& token) const {
  if (auto id = impl_->added.TokenId(token)) return id;
  return impl_->model->TokenId(token);
}

std::optional<std::string> HfTokenizer::TokenText(int64_t id) const {
  if (const AddedToken* added = impl_->added.TokenOfId(id)) return added->content;
  if (const std::string* text = impl_->model->TokenText(id)) return *text;
  return std::nullopt;
}

int64_t HfTokenizer::vocab_size() const { return std::max(impl_->model->max_id(), impl_->added.max_id()) + 1; }

std::optional<std::string> HfTokenizer::eos_token() const { return impl_->eos_token; }
std::optional<std::string> HfTokenizer::pad_token() const { return impl_->pad_token; }
std::optional<std::string> HfTokenizer::bos_token() const { return impl_->bos_token; }

}  // namespace headroom::worker
