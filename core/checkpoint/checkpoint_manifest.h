// manifest.json: what a checkpoint step holds, written last (docs/design.md, "Checkpoints").
// Read and written here only; the worker's reader and writer, resharding and `headroom
// export` all go through this type.
//
//   {"format": "headroom-checkpoint/1", "step": 120, "world_size": 2, "spec_hash": "...",
//    "data_cursor": <json>, "guard_history": <json>, "extra": <json>,
//    "rng_state": ["<base64>", ...]            one entry per rank at save
//    "files": {"rank-00000.bin": {"bytes": N, "sha256": "<64 hex digits>"}, ...},
//    "tensors": {"<name>": {"dtype": "float32", "shape": [..],
//                "shards": [{"file": "rank-00000.bin", "offset": 0, "numel": 96,
//                            "file_offset": 0}, ...]}}}
//
// A shard is a contiguous range of the tensor flattened in row-major order: elements
// [offset, offset + numel), stored at byte `file_offset` of `file`. The shards of a
// tensor tile [0, numel) exactly, so any rank of any world size can read any range.
// A file's sha256 is of its bytes as written; a step saved before checksums existed has
// none, and its files are then checked by size only.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint_error.h"

namespace headroom::checkpoint {

struct ShardEntry {
  std::string file;
  int64_t offset = 0;  // first element, in the flattened tensor
  int64_t numel = 0;
  int64_t file_offset = 0;  // bytes
};

struct TensorEntry {
  std::string dtype = "float32";  // a name ElementSize() knows
  std::vector<int64_t> shape;
  std::vector<ShardEntry> shards;  // sorted by offset once validated
  int64_t numel() const;
};

struct CheckpointManifest {
  static constexpr const char* kFormat = "headroom-checkpoint/1";

  int64_t step = 0;
  int world_size = 1;
  std::string spec_hash;
  nlohmann::json data_cursor;          // where the training data continues
  nlohmann::json guard_history;        // the memory guard's series, opaque here
  nlohmann::json extra;                // anything else the trainer wants back
  std::vector<std::string> rng_state;  // raw bytes, one per rank at save
  std::map<std::string, uint64_t> file_bytes;
  std::map<std::string, std::string> file_sha256;  // hex; absent for steps saved without
  std::map<std::string, TensorEntry> tensors;

  nlohmann::json ToJson() const;
  // Throws CheckpointError naming `where` and the offending field.
  static CheckpointManifest FromJson(const nlohmann::json& json, const std::string& where);
  // Every tensor's shards tile [0, numel) with no gap or overlap and lie inside their
  // file's recorded size. Sorts shards by offset. Throws CheckpointError naming `where`.
  void Validate(const std::string& where);

  // DIR/step-N/manifest.json parsed and validated, and every file it lists present with
  // the size it recorded. Throws CheckpointError naming the file (a truncated or
  // overwritten one as such).
  static CheckpointManifest Read(const std::filesystem::path& step_dir);
  // Hashes `file` of `step_dir` and compares it with the recorded sha256; throws
  // CheckpointError naming the file when they differ. No-op for a file saved without one.
  void VerifyFile(const std::filesystem::path& step_dir, const std::string& file) const;
};

// Bytes per element of a dtype name ("float32" 4, "bfloat16" 2, "bool" 1, ...); throws
// CheckpointError for a name the format does not know.
int64_t ElementSize(const std::string& dtype);

}  // namespace headroom::checkpoint
