// Saving one checkpoint step from every rank at once (docs/design.md, "Checkpoints").
//
// Every rank calls Save() with the same step at the same point (it is a collective).
// The protocol:
//   1. rank 0 creates DIR/step-N.partial/ (removing a stale one); barrier.
//   2. every rank writes its slices to rank-RRRRR.bin there (write, fsync, dir fsync),
//      hashing them as written, then reads the file back from storage (its page cache
//      dropped) and compares the SHA-256: the step is verified before it can replace
//      an older one.
//   3. all ranks exchange their shard tables and file checksums through the
//      communicator (an all_gather), so each knows whether every rank's data is durable.
//   4. rank 0 checks the tables tile every tensor, writes manifest.json with each file's
//      size and sha256 (temp file, fsync, rename), renames step-N.partial to step-N,
//      fsyncs DIR, points `latest` at it (atomic rename, fsync), then prunes to the
//      newest `keep` steps (core/checkpoint/checkpoint_layout.h).
//   5. rank 0 broadcasts the outcome; every rank returns or throws together.
// A crash at any point leaves `latest` naming the previous complete step (the next save
// clears what it left); a save that fails removes its own step-N.partial.
//
// What a rank passes: the slices it owns (any contiguous range of a tensor's flattened
// elements; together the ranks' slices must tile each tensor exactly), its RNG state
// (opaque bytes) and the run metadata (taken from rank 0).
#pragma once

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "worker/checkpoint/checkpoint_format.h"
#include "worker/comm/communicator.h"

namespace headroom::worker {

// One rank's piece of a tensor: elements [offset, offset + data.numel()) of the tensor
// flattened; `data` may have any shape, device or layout (it is copied out as needed).
struct TensorSlice {
  std::string name;
  std::vector<int64_t> global_shape;
  int64_t offset = 0;
  torch::Tensor data;
};

// The whole tensor, as a slice, for state that only one rank saves.
TensorSlice WholeTensor(const std::string& name, const torch::Tensor& tensor);
// The even split of a replicated tensor: rank r of `world` saves its 1/world range, so
// replicated state is written once, in parallel.
TensorSlice EvenSliceOf(const std::string& name, const torch::Tensor& tensor, int rank, int world);

struct CheckpointMetadata {
  int64_t step = 0;
  std::string spec_hash;         // core/spec RunDefinitionHash of the job
  nlohmann::json data_cursor;    // where the data stream continues
  nlohmann::json guard_history;  // the memory guard's series
  nlohmann::json extra;          // anything else to restore (microBatchSize at save, ...)
};

struct CheckpointWriterOptions {
  int keep = 2;  // newest complete steps retained
  // Test hook: called with "rank_file_synced" (this rank's data fsync'd, not yet read
  // back), "rank_file_written" (after this rank's data is durable and verified, or its
  // write failed), "manifest_written" (rank 0, before step-N.partial is renamed) and
  // "published" (rank 0, step-N in place, before `latest` moves), so a test can kill or
  // damage mid-save. The same points are drills for $HEADROOM_KILL_AT
  // (core/checkpoint/fault_point.h).
  std::function<void(const std::string& stage)> on_stage;
};

// What one save cost, for the step log and the bench.
struct CheckpointSaveStats {
  int64_t step = 0;
  std::filesystem::path dir;
  uint64_t bytes_written = 0;  // by this rank
  uint64_t total_bytes = 0;    // by all ranks
  double write_seconds = 0;    // this rank's write + fsync + read-back check
  double seconds = 0;          // the whole collective save, start to commit
};

class CheckpointWriter {
 public:
  CheckpointWriter(std::filesystem::path root, Communicator& comm, CheckpointWriterOptions options = {});

  // Collective. Throws CheckpointError (its own failure, or another rank's, named); a
  // failed save (a full disk, a write error on any rank) removes its step-N.partial and
  // leaves the previous complete step and `latest` as they were.
  CheckpointSaveStats Save(const CheckpointMetadata& metadata, const std::vector<TensorSlice>& slices,
                           const std::string& rng_state);

 private:
  // Tells options_.on_stage, then passes the fault point of that name (none when null).
  void Reached(const std::string& stage, const char* fault_point, int64_t step) const;

  std::filesystem::path root_;
  Communicator& comm_;
  CheckpointWriterOptions options_;
};

}  // namespace headroom::worker
