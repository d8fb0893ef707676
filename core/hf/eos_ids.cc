#include "core/hf/eos_ids.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/files/input_file.h"

namespace headroom::hf {
namespace {

namespace fs = std::filesystem;

// One file's eos_token_id; empty when the file or the field is absent (or null).
std::vector<int64_t> EosIdsOf(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return {};
  std::string text;
  try {
    text = files::ReadWholeFile(file.string(), files::kMaxJsonFileBytes, "a JSON file");
  } catch (const files::InputFileError& e) {
    throw HfConfigError(e.what());
  }
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw HfConfigError(file.string() + ": not a JSON object");
  const auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return {};
  std::vector<int64_t> ids;
  for (const auto& v : it->is_array() ? *it : nlohmann::json::array({*it})) {
    if (!v.is_number_integer()) throw HfConfigError(file.string() + ": eos_token_id: not an integer or a list of them");
    const int64_t id = v.get<int64_t>();
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

}  // namespace

std::vector<int64_t> LoadEosTokenIds(const std::string& model_dir) {
  std::vector<int64_t> ids = EosIdsOf(fs::path(model_dir) / "generation_config.json");
  if (ids.empty()) ids = EosIdsOf(fs::path(model_dir) / "config.json");
  return ids;
}

}  // namespace headroom::hf
