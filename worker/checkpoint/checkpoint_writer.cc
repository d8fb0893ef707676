#include <spdlog/spdlog.h>

#include "worker/checkpoint/checkpoint_writer.h"

#include <chrono>

#include "core/checkpoint/fault_point.h"
#include "core/files/remove_tree.h"
#include "worker/checkpoint/checkpoint_format.h"
#include "worker/checkpoint/rank_agreement.h"

namespace headroom::worker {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

int64_t Product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// This rank's slices into `path` (write, fsync, then read back from storage and compared
// with what was written); returns its shard table, or one with "error" set.
nlohmann::json WriteRankFile(const std::filesystem::path& path, int rank, const std::vector<TensorSlice>& slices,
                             const std::string& rng_state, const std::function<void(const std::string&)>& on_stage) {
  nlohmann::json table;
  table["rank"] = rank;
  table["file"] = path.filename().string();
  table["rng_state"] = Base64Encode(rng_state);
  table["shards"] = nlohmann::json::array();
  try {
    DurableFile file(path);
    for (const auto& slice : slices) {
      torch::Tensor data = slice.data.detach().to(torch::kCPU).contiguous();
      const int64_t total = Product(slice.global_shape);
      if (slice.offset < 0 || slice.offset + data.numel() > total) {
        throw CheckpointError("slice of '" + slice.name + "' at element " + std::to_string(slice.offset) + " with " +
                              std::to_string(data.numel()) + " elements lies outside its " + std::to_string(total) +
                              " elements");
      }
      table["shards"].push_back({{"name", slice.name},
                                 {"dtype", DtypeName(data.scalar_type())},
                                 {"shape", slice.global_shape},
                                 {"offset", slice.offset},
                                 {"numel", data.numel()},
                                 {"file_offset", file.bytes_written()}});
      file.Write(data.data_ptr(), static_cast<size_t>(data.numel()) * data.element_size());
    }
    file.Sync();
    file.Close();
    SyncDirectory(path.parent_path());
    if (on_stage) on_stage("rank_file_synced");
    // Verified before the step can be published and older steps pruned: a step that
    // did not reach the storage intact must never replace the last good one.
    const std::string stored = checkpoint::FileSha256(path);
    if (stored != file.sha256_hex()) {
      throw CheckpointError(path.string() + " reads back with sha256 " + stored + ", but " + file.sha256_hex() +
                            " was written: the storage did not keep the bytes");
    }
    table["bytes"] = file.bytes_written();
    table["sha256"] = stored;
  } catch (const std::exception& e) {
    table["error"] = e.what();
  }
  return table;
}

// The manifest of every rank's shard table; throws CheckpointError when the ranks disagree
// on a tensor or the shards do not tile it.
CheckpointManifest BuildManifest(const CheckpointMetadata& metadata, int world,
                                 const std::vector<nlohmann::json>& tables, const std::string& what) {
  CheckpointManifest manifest;
  manifest.step = metadata.step;
  manifest.world_size = world;
  manifest.spec_hash = metadata.spec_hash;
  manifest.data_cursor = metadata.data_cursor;
  manifest.guard_history = metadata.guard_history;
  manifest.extra = metadata.extra;
  for (const auto& t : tables) {
    const std::string file = t["file"];
    manifest.rng_state.push_back(Base64Decode(t["rng_state"].get<std::string>()));
    manifest.file_bytes[file] = t["bytes"].get<uint64_t>();
    manifest.file_sha256[file] = t["sha256"].get<std::string>();
    for (const auto& s : t["shards"]) {
      const std::string name = s["name"];
      auto [it, inserted] = manifest.tensors.try_emplace(name);
      TensorEntry& entry = it->second;
      const std::string dtype = s["dtype"];
      const auto shape = s["shape"].get<std::vector<int64_t>>();
      if (inserted) {
        entry.dtype = dtype;
        entry.shape = shape;
      } else if (entry.dtype != dtype || entry.shape != shape) {
        throw CheckpointError("tensor '" + name + "': rank " + std::to_string(t["rank"].get<int>()) + " saved it as " +
                              dtype + " of shape " + nlohmann::json(shape).dump() + ", another rank as " + entry.dtype +
                              " of shape " + nlohmann::json(entry.shape).dump());
      }
      entry.shards.push_back({file, s["offset"], s["numel"], s["file_offset"]});
    }
  }
  manifest.Validate(what);
  return manifest;
}

// `text` with the paths under `dir` shortened to their names below it: the message that
// quotes them already names the step, and a supervisor shows the first 200 characters,
// where the system's reason (No space left on device) must still be.
std::string NamesBelow(std::string text, const std::filesystem::path& dir) {
  const std::string prefix = dir.string() + "/";
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at))
    text.erase(at, prefix.size());
  return text;
}

// A save that failed leaves no step-N.partial behind (the previous step and `latest` were
// never touched, so nothing else needs undoing). Returns "" or why it could not be removed.
std::string DiscardPartial(const std::filesystem::path& partial) {
  std::error_code ec;
  if (files::RemoveTree(partial, ec)) return "";
  return " (" + partial.string() + " is left behind: " + ec.message() + ")";
}

}  // namespace

TensorSlice WholeTensor(const std::string& name, const torch::Tensor& tensor) {
  return {name, tensor.sizes().vec(), 0, tensor};
}

TensorSlice EvenSliceOf(const std::string& name, const torch::Tensor& tensor, int rank, int world) {
  const int64_t n = tensor.numel();
  const int64_t begin = n * rank / world;
  const int64_t end = n * (rank + 1) / world;
  return {name, tensor.sizes().vec(), begin, tensor.reshape({-1}).slice(0, begin, end)};
}

CheckpointWriter::CheckpointWriter(std::filesystem::path root, Communicator& comm, CheckpointWriterOptions options)
    : root_(std::move(root)), comm_(comm), options_(std::move(options)) {}

void CheckpointWriter::Reached(const std::string& stage, const char* fault_point, int64_t step) const {
  if (options_.on_stage) options_.on_stage(stage);
  if (fault_point) checkpoint::ReachedFaultPoint(fault_point, step);
}

CheckpointSaveStats CheckpointWriter::Save(const CheckpointMetadata& metadata, const std::vector<TensorSlice>& slices,
                                           const std::string& rng_state) {
  const auto start = Clock::now();
  const int rank = comm_.rank();
  const int world = comm_.world_size();
  const std::string step_name = StepDirName(metadata.step);
  const auto final_dir = root_ / step_name;
  const auto partial = root_ / (step_name + kPartialSuffix);
  const std::string what = "checkpoint " + final_dir.string();
  CheckpointSaveStats stats;
  stats.step = metadata.step;
  stats.dir = final_dir;

  // 1. Rank 0 prepares the staging directory.
  std::string error;
  if (rank == 0) {
    try {
      std::filesystem::create_directories(root_);
      files::RemoveTree(partial);
      std::filesystem::create_directory(partial);
      SyncDirectory(root_);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (!BroadcastOk(comm_, error.empty())) {
    throw CheckpointError(what + ": rank 0 could not create " + partial.string() +
                          (error.empty() ? " (see rank 0's log)" : ": " + error + DiscardPartial(partial)));
  }

  // 2. This rank's slices, durable and verified before anyone hears of them.
  const auto write_start = Clock::now();
  const nlohmann::json table = WriteRankFile(partial / RankFileName(rank), rank, slices, rng_state, options_.on_stage);
  stats.write_seconds = SecondsSince(write_start);
  if (table.contains("bytes")) stats.bytes_written = table["bytes"].get<uint64_t>();
  Reached("rank_file_written", table.contains("error") ? nullptr : "checkpoint_tensors_written", metadata.step);

  // 3. Every rank learns every rank's outcome.
  std::vector<nlohmann::json> tables;
  for (const auto& bytes : AllGatherBytes(comm_, table.dump())) tables.push_back(nlohmann::json::parse(bytes));
  for (const auto& t : tables) {
    if (t.contains("error")) {
      // Every rank is past its write (the gather above): rank 0 may remove the staging.
      throw CheckpointError(what + ": rank " + std::to_string(t["rank"].get<int>()) +
                            " could not write its slices: " + NamesBelow(t["error"].get<std::string>(), partial) +
                            (rank == 0 ? DiscardPartial(partial) : ""));
    }
    stats.total_bytes += t["bytes"].get<uint64_t>();
  }

  // 4. Rank 0 commits.
  error.clear();
  if (rank == 0) {
    try {
      const CheckpointManifest manifest = BuildManifest(metadata, world, tables, what);
      ReplaceFileAtomically(partial / kManifestFileName, manifest.ToJson().dump(1));
      Reached("manifest_written", "checkpoint_manifest_written", metadata.step);
      checkpoint::PublishDirectory(partial, final_dir);
      Reached("published", "checkpoint_published", metadata.step);
      WriteLatest(root_, metadata.step);
      PruneCheckpoints(root_, options_.keep);
    } catch (const std::exception& e) {
      // Gone already when the rename published it: a complete step is kept either way.
      error = e.what() + DiscardPartial(partial);
    }
  }

  // 5. Everyone returns or throws together.
  if (!BroadcastOk(comm_, error.empty())) {
    throw CheckpointError(rank == 0 ? what + ": " + error
                                    : what + ": rank 0 could not commit the step (see rank 0's log)");
  }
  stats.seconds = SecondsSince(start);
  return stats;
}

}  // namespace headroom::worker
