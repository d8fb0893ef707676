#include <spdlog/spdlog.h>

#include "worker/checkpoint/checkpoint_manifest.h"

#include <algorithm>

#include "worker/checkpoint/base64.h"
#include "worker/checkpoint/durable_file.h"

namespace headroom::worker {
namespace {

const std::vector<std::pair<c10::ScalarType, std::string>>& DtypeNames() {
  static const std::vector<std::pair<c10::ScalarType, std::string>> names = {
      {torch::kFloat32, "float32"}, {torch::kFloat64, "float64"}, {torch::kFloat16, "float16"},
      {torch::kBFloat16, "bfloat16"}, {torch::kInt64, "int64"},   {torch::kInt32, "int32"},
      {torch::kInt16, "int16"},     {torch::kInt8, "int8"},       {torch::kUInt8, "uint8"},
      {torch::kBool, "bool"}};
  return names;
}

// json[key] as T, or a CheckpointError naming the field.
template <typename T>
T Field(const nlohmann::json& json, const std::string& key, const std::string& where) {
  if (!json.is_object() || !json.contains(key)) throw CheckpointError(where + ": missing field '" + key + "'");
  try {
    return json.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(where + ": field '" + key + "' has the wrong type (" + e.what() + ")");
  }
}

}  // namespace

int64_t TensorEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string DtypeName(c10::ScalarType dtype) {
  for (const auto& [type, name] : DtypeNames()) {
    if (type == dtype) return name;
  }
  throw CheckpointError("checkpoint: dtype " + std::string(c10::toString(dtype)) + " cannot be stored");
}

c10::ScalarType DtypeFromName(const std::string& name) {
  for (const auto& [type, n] : DtypeNames()) {
    if (n == name) return type;
  }
  throw CheckpointError("checkpoint: unknown dtype '" + name + "'");
}

nlohmann::json CheckpointManifest::ToJson() const {
  nlohmann::json json;
  json["format"] = kFormat;
  json["step"] = step;
  json["world_size"] = world_size;
  json["spec_hash"] = spec_hash;
  json["data_cursor"] = data_cursor;
  json["guard_history"] = guard_history;
  json["extra"] = extra;
  json["rng_state"] = nlohmann::json::array();
  for (const auto& bytes : rng_state) json["rng_state"].push_back(Base64Encode(bytes));
  json["files"] = nlohmann::json::object();
  for (const auto& [file, bytes] : file_bytes) json["files"][file] = {{"bytes", bytes}};
  json["tensors"] = nlohmann::json::object();
  for (const auto& [name, entry] : tensors) {
    nlohmann::json t;
    t["dtype"] = DtypeName(entry.dtype);
    t["shape"] = entry.shape;
    t["shards"] = nlohmann::json::array();
    for (const auto& s : entry.shards) {
      t["shards"].push_back({{"file", s.file}, {"offset", s.offset}, {"numel", s.numel}, {"file_offset", s.file_offset}});
    }
    json["tensors"][name] = std::move(t);
  }
  return json;
}

CheckpointManifest CheckpointManifest::FromJson(const nlohmann::json& json, const std::string& where) {
  const auto format = Field<std::string>(json, "format", where);
  if (format != kFormat) {
    throw CheckpointError(where + ": format '" + format + "' is not " + kFormat + " (written by another version?)");
  }
  CheckpointManifest m;
  m.step = Field<int64_t>(json, "step", where);
  m.world_size = Field<int>(json, "world_size", where);
  m.spec_hash = Field<std::string>(json, "spec_hash", where);
  m.data_cursor = json.value("data_cursor", nlohmann::json());
  m.guard_history = json.value("guard_history", nlohmann::json());
  m.extra = json.value("extra", nlohmann::json());
  for (const auto& text : Field<std::vector<std::string>>(json, "rng_state", where)) {
    m.rng_state.push_back(Base64Decode(text));
  }
  const auto& files = json.at("files");
  if (!files.is_object()) throw CheckpointError(where + ": 'files' must be an object");
  for (const auto& [file, info] : files.items()) {
    m.file_bytes[file] = Field<uint64_t>(info, "bytes", where + ": files." + file);
  }
  const auto& tensors = Field<nlohmann::json>(json, "tensors", where);
  if (!tensors.is_object()) throw CheckpointError(where + ": 'tensors' must be an object");
  for (const auto& [name, t] : tensors.items()) {
    const std::string at = where + ": tensors." + name;
    TensorEntry entry;
    entry.dtype = DtypeFromName(Field<std::string>(t, "dtype", at));
    entry.shape = Field<std::vector<int64_t>>(t, "shape", at);
    for (const auto& s : Field<nlohmann::json>(t, "shards", at)) {
      entry.shards.push_back({Field<std::string>(s, "file", at), Field<int64_t>(s, "offset", at),
                              Field<int64_t>(s, "numel", at), Field<int64_t>(s, "file_offset", at)});
    }
    m.tensors[name] = std::move(entry);
  }
  return m;
}

void CheckpointManifest::Validate(const std::string& where) {
  if (world_size < 1) throw CheckpointError(where + ": world_size " + std::to_string(world_size) + " < 1");
  for (auto& [name, entry] : tensors) {
    const std::string at = where + ": tensor '" + name + "'";
    for (int64_t d : entry.shape) {
      if (d < 0) throw CheckpointError(at + " has a negative dimension");
    }
    std::sort(entry.shards.begin(), entry.shards.end(),
              [](const ShardEntry& a, const ShardEntry& b) { return a.offset < b.offset; });
    const int64_t element = static_cast<int64_t>(c10::elementSize(entry.dtype));
    int64_t next = 0;
    for (const auto& s : entry.shards) {
      if (s.numel == 0) continue;
      if (s.offset != next || s.numel < 0) {
        throw CheckpointError(at + ": shards do not tile its " + std::to_string(entry.numel()) + " elements: " +
                              (s.offset > next ? "elements [" + std::to_string(next) + ", " + std::to_string(s.offset) +
                                                     ") are in no shard"
                                               : "shard in " + s.file + " at element " + std::to_string(s.offset) +
                                                     " overlaps the previous one"));
      }
      auto file = file_bytes.find(s.file);
      if (file == file_bytes.end()) throw CheckpointError(at + ": shard names unknown file '" + s.file + "'");
      if (s.file_offset < 0 || static_cast<uint64_t>(s.file_offset + s.numel * element) > file->second) {
        throw CheckpointError(at + ": shard at byte " + std::to_string(s.file_offset) + " of " + s.file +
                              " runs past the file's " + std::to_string(file->second) + " bytes");
      }
      next = s.offset + s.numel;
    }
    if (next != entry.numel()) {
      throw CheckpointError(at + ": shards cover " + std::to_string(next) + " of its " +
                            std::to_string(entry.numel()) + " elements");
    }
  }
}

}  // namespace headroom::worker
