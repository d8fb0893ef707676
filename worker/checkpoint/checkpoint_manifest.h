// manifest.json: what a checkpoint step holds, written last (docs/design.md, "Checkpoints").
//
//   {"format": "headroom-checkpoint/1", "step": 120, "world_size": 2, "spec_hash": "...",
//    "data_cursor": <json>, "guard_history": <json>, "extra": <json>,
//    "rng_state": ["<base64>", ...]            one entry per rank at save
//    "files": {"rank-00000.bin": {"bytes": N}, ...},
//    "tensors": {"<name>": {"dtype": "float32", "shape": [..],
//                "shards": [{"file": "rank-00000.bin", "offset": 0, "numel": 96,
//                            "file_offset": 0}, ...]}}}
//
// A shard is a contiguous range of the tensor flattened in row-major order: elements
// [offset, offset + numel), stored at byte `file_offset` of `file`. The shards of a
// tensor tile [0, numel) exactly, so any rank of any world size can read any range.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace headroom::worker {

struct ShardEntry {
  std::string file;
  int64_t offset = 0;       // first element, in the flattened tensor
  int64_t numel = 0;
  int64_t file_offset = 0;  // bytes
};

struct TensorEntry {
  c10::ScalarType dtype = torch::kFloat32;
  std::vector<int64_t> shape;
  std::vector<ShardEntry> shards;  // sorted by offset once validated
  int64_t numel() const;
};

struct CheckpointManifest {
  static constexpr const char* kFormat = "headroom-checkpoint/1";

  int64_t step = 0;
  int world_size = 1;
  std::string spec_hash;
  nlohmann::json data_cursor;    // where the training data continues
  nlohmann::json guard_history;  // the memory guard's series, opaque here
  nlohmann::json extra;          // anything else the trainer wants back
  std::vector<std::string> rng_state;  // raw bytes, one per rank at save
  std::map<std::string, uint64_t> file_bytes;
  std::map<std::string, TensorEntry> tensors;

  nlohmann::json ToJson() const;
  // Throws CheckpointError naming `where` and the offending field.
  static CheckpointManifest FromJson(const nlohmann::json& json, const std::string& where);
  // Every tensor's shards tile [0, numel) with no gap or overlap and lie inside their
  // file's recorded size. Sorts shards by offset. Throws CheckpointError naming `where`.
  void Validate(const std::string& where);
};

// "float32", "bfloat16", ... <-> the torch dtype; throws CheckpointError for others.
std::string DtypeName(c10::ScalarType dtype);
c10::ScalarType DtypeFromName(const std::string& name);

}  // namespace headroom::worker
