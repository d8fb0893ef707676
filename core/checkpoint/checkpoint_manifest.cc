#include "core/checkpoint/checkpoint_manifest.h"

#include <algorithm>

#include "core/checkpoint/base64.h"
#include "core/checkpoint/checkpoint_layout.h"
#include "core/checkpoint/durable_file.h"

namespace headroom::checkpoint {
namespace {

const std::map<std::string, int64_t>& ElementSizes() {
  static const std::map<std::string, int64_t> sizes = {{"float32", 4}, {"float64", 8}, {"float16", 2}, {"bfloat16", 2},
                                                       {"int64", 8},   {"int32", 4},   {"int16", 2},   {"int8", 1},
                                                       {"uint8", 1},   {"bool", 1}};
  return sizes;
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

int64_t ElementSize(const std::string& dtype) {
  auto it = ElementSizes().find(dtype);
  if (it == ElementSizes().end()) throw CheckpointError("checkpoint: unknown dtype '" + dtype + "'");
  return it->second;
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
  for (const auto& [file, bytes] : file_bytes) {
    json["files"][file] = {{"bytes", bytes}};
    if (auto sha = file_sha256.find(file); sha != file_sha256.end()) json["files"][file]["sha256"] = sha->second;
  }
  json["tensors"] = nlohmann::json::object();
  for (const auto& [name, entry] : tensors) {
    nlohmann::json t;
    t["dtype"] = entry.dtype;
    t["shape"] = entry.shape;
    t["shards"] = nlohmann::json::array();
    for (const auto& s : entry.shards) {
      t["shards"].push_back(
          {{"file", s.file}, {"offset", s.offset}, {"numel", s.numel}, {"file_offset", s.file_offset}});
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
    if (info.is_object() && info.contains("sha256")) {
      m.file_sha256[file] = Field<std::string>(info, "sha256", where + ": files." + file);
    }
  }
  const auto& tensors = Field<nlohmann::json>(json, "tensors", where);
  if (!tensors.is_object()) throw CheckpointError(where + ": 'tensors' must be an object");
  for (const auto& [name, t] : tensors.items()) {
    const std::string at = where + ": tensors." + name;
    TensorEntry entry;
    entry.dtype = Field<std::string>(t, "dtype", at);
    ElementSize(entry.dtype);  // a known name
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
    const int64_t element = ElementSize(entry.dtype);
    int64_t next = 0;
    for (const auto& s : entry.shards) {
      if (s.numel == 0) continue;
      if (s.offset != next || s.numel < 0) {
        throw CheckpointError(
            at + ": shards do not tile its " + std::to_string(entry.numel()) + " elements: " +
            (s.offset > next
                 ? "elements [" + std::to_string(next) + ", " + std::to_string(s.offset) + ") are in no shard"
                 : "shard in " + s.file + " at element " + std::to_string(s.offset) + " overlaps the previous one"));
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
      throw CheckpointError(at + ": shards cover " + std::to_string(next) + " of its " + std::to_string(entry.numel()) +
                            " elements");
    }
  }
}

CheckpointManifest CheckpointManifest::Read(const std::filesystem::path& step_dir) {
  const auto manifest_path = step_dir / kManifestFileName;
  if (!std::filesystem::exists(manifest_path)) {
    throw CheckpointError("checkpoint " + step_dir.string() + " has no " + kManifestFileName +
                          ": the step was never completed");
  }
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(ReadWholeFile(manifest_path));
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(manifest_path.string() + " is not valid JSON: " + e.what());
  }
  CheckpointManifest manifest = FromJson(json, manifest_path.string());
  manifest.Validate(manifest_path.string());
  for (const auto& [file, bytes] : manifest.file_bytes) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(step_dir / file, ec);
    if (ec) throw CheckpointError("checkpoint " + step_dir.string() + ": " + file + " is missing: " + ec.message());
    if (size != bytes) {
      throw CheckpointError("checkpoint " + step_dir.string() + ": " + file + " has " + std::to_string(size) +
                            " bytes, the manifest recorded " + std::to_string(bytes) +
                            (size < bytes ? " (truncated)" : " (overwritten)"));
    }
  }
  return manifest;
}

void CheckpointManifest::VerifyFile(const std::filesystem::path& step_dir, const std::string& file) const {
  auto recorded = file_sha256.find(file);
  if (recorded == file_sha256.end()) return;
  const std::string actual = FileSha256(step_dir / file);
  if (actual != recorded->second) {
    throw CheckpointError("checkpoint " + step_dir.string() + ": " + file + " is corrupt: its sha256 is " + actual +
                          ", the manifest recorded " + recorded->second);
  }
}

}  // namespace headroom::checkpoint
