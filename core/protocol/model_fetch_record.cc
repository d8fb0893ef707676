#include "core/protocol/model_fetch_record.h"

#include <nlohmann/json.hpp>

namespace headroom::protocol {

namespace {
constexpr const char* kKey = "model_fetch";
}  // namespace

std::string ModelFetchRecord::ToJson() const {
  nlohmann::ordered_json inner;
  inner["repo"] = repo;
  inner["revision"] = revision;
  inner["file"] = file;
  inner["done_bytes"] = done_bytes;
  inner["total_bytes"] = total_bytes;
  nlohmann::ordered_json j;
  j[kKey] = inner;
  return j.dump();
}

std::optional<ModelFetchRecord> ParseModelFetchLine(const std::string& line) {
  if (line.find(kKey) == std::string::npos) return std::nullopt;  // most lines: no parse needed
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains(kKey) || !j[kKey].is_object()) return std::nullopt;
  const nlohmann::json& f = j[kKey];
  ModelFetchRecord r;
  auto text = [&](const char* key, std::string& out) {
    if (f.contains(key) && f[key].is_string()) out = f[key].get<std::string>();
  };
  auto count = [&](const char* key, int64_t& out) {
    if (f.contains(key) && f[key].is_number_integer()) out = f[key].get<int64_t>();
  };
  text("repo", r.repo);
  text("revision", r.revision);
  text("file", r.file);
  count("done_bytes", r.done_bytes);
  count("total_bytes", r.total_bytes);
  return r;
}

}  // namespace headroom::protocol
