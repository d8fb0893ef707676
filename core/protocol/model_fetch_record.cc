#include "core/protocol/model_fetch_record.h"

#include <nlohmann/json.hpp>

#include "core/protocol/lenient_json.h"

namespace headroom::protocol {

namespace {
constexpr const char* kKey = "model_fetch";
}  // namespace

std::string ModelFetchRecord::ToJson() const {
  const nlohmann::ordered_json inner = {
      {"repo", repo}, {"revision", revision}, {"file", file}, {"done_bytes", done_bytes}, {"total_bytes", total_bytes}};
  return nlohmann::ordered_json{{kKey, inner}}.dump();
}

std::optional<ModelFetchRecord> ParseModelFetchLine(const std::string& line) {
  if (line.find(kKey) == std::string::npos) return std::nullopt;  // most lines: no parse needed
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains(kKey) || !j[kKey].is_object()) return std::nullopt;
  const nlohmann::json& f = j[kKey];
  ModelFetchRecord r;
  using lenient_json::ReadInteger;
  using lenient_json::ReadString;
  ReadString(f, "repo", r.repo);
  ReadString(f, "revision", r.revision);
  ReadString(f, "file", r.file);
  ReadInteger(f, "done_bytes", r.done_bytes);
  ReadInteger(f, "total_bytes", r.total_bytes);
  return r;
}

}  // namespace headroom::protocol
