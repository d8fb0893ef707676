#include "core/hf/eos_ids.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/files/input_file.h"

namespace headroom::hf {

std::vector<int64_t> LoadEosTokenIds(const std::string& model_dir, const HfModelConfig& config) {
  const std::filesystem::path file = std::filesystem::path(model_dir) / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return config.eos_token_ids;
  std::string text;
  try {
    text = files::ReadWholeFile(file.string(), files::kMaxJsonFileBytes, "a JSON file");
  } catch (const files::InputFileError& e) {
    throw HfConfigError(e.what());
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw HfConfigError(file.string() + ": not a JSON object");
  std::vector<int64_t> ids = ReadEosTokenIds(j, file.string());
  return ids.empty() ? config.eos_token_ids : ids;
}

}  // namespace headroom::hf
