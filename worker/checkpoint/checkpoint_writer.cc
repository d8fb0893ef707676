#include <spdlog/spdlog.h>

#include "worker/checkpoint/checkpoint_writer.h"

#include <fcntl.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/files/remove_tree.h"
#include "worker/checkpoint/base64.h"
#include "worker/checkpoint/checkpoint_directory.h"
#include "worker/checkpoint/checkpoint_manifest.h"

namespace headroom::worker {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

int64_t Product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Every rank's `bytes`, in rank order: two all_gathers (lengths, then padded bytes) on
// the communicator's device, so it works for any backend.
std::vector<std::string> AllGatherBytes(Communicator& comm, const std::string& bytes) {
  const int world = comm.world_size();
  const auto on_device = torch::TensorOptions().device(comm.device());
  torch::Tensor length = torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kInt64).to(comm.device());
  torch::Tensor lengths = torch::zeros({world}, on_device.dtype(torch::kInt64));
  comm.all_gather(length, lengths);
  lengths = lengths.cpu();
  const int64_t longest = lengths.max().item<int64_t>();
  torch::Tensor mine = torch::zeros({longest}, torch::kUInt8);
  std::memcpy(mine.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  torch::Tensor all = torch::zeros({world * longest}, on_device.dtype(torch::kUInt8));
  comm.all_gather(mine.to(comm.device()), all);
  all = all.cpu();
  std::vector<std::string> out;
  for (int r = 0; r < world; ++r) {
    const char* begin = reinterpret_cast<const char*>(all.data_ptr<uint8_t>()) + r * longest;
    out.emplace_back(begin, static_cast<size_t>(lengths[r].item<int64_t>()));
  }
  return out;
}

// Rank 0 tells everyone whether it succeeded; returns true when it did.
bool BroadcastOk(Communicator& comm, bool ok) {
  torch::Tensor flag = torch::tensor({static_cast<int64_t>(ok ? 1 : 0)}, torch::kInt64).to(comm.device());
  comm.broadcast(flag, 0);
  return flag.cpu().item<int64_t>() == 1;
}

// Moves the finished `partial` directory to `final`, also when `final` exists (the same
// step saved again after a resume): swapped atomically where the filesystem can.
void Publish(const std::filesystem::path& partial, const std::filesystem::path& final_dir) {
  if (::rename(partial.c_str(), final_dir.c_str()) == 0) return;
  if (errno != EEXIST && errno != ENOTEMPTY) {
    throw CheckpointError("cannot rename " + partial.string() + " to " + final_dir.string() + ": " +
                          std::strerror(errno));
  }
  if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    files::RemoveTree(partial);  // now holds the replaced step
    return;
  }
  std::filesystem::path aside = final_dir;
  aside += ".replaced";
  files::RemoveTree(aside);
  std::filesystem::rename(final_dir, aside);
  std::filesystem::rename(partial, final_dir);
  files::RemoveTree(aside);
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
                          (error.empty() ? " (see rank 0's log)" : ": " + error));
  }

  // 2. This rank's slices, durable before anyone hears of them.
  nlohmann::json table;
  table["rank"] = rank;
  table["file"] = RankFileName(rank);
  table["rng_state"] = Base64Encode(rng_state);
  table["shards"] = nlohmann::json::array();
  const auto write_start = Clock::now();
  try {
    DurableFile file(partial / RankFileName(rank));
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
    stats.bytes_written = file.bytes_written();
    file.Close();
    SyncDirectory(partial);
    table["bytes"] = stats.bytes_written;
  } catch (const std::exception& e) {
    table["error"] = e.what();
  }
  stats.write_seconds = SecondsSince(write_start);
  if (options_.on_stage) options_.on_stage("rank_file_written");

  // 3. Every rank learns every rank's outcome.
  std::vector<nlohmann::json> tables;
  for (const auto& bytes : AllGatherBytes(comm_, table.dump())) tables.push_back(nlohmann::json::parse(bytes));
  for (const auto& t : tables) {
    if (t.contains("error")) {
      throw CheckpointError(what + ": rank " + std::to_string(t["rank"].get<int>()) + " could not write its slices: " +
                            t["error"].get<std::string>());
    }
    stats.total_bytes += t["bytes"].get<uint64_t>();
  }

  // 4. Rank 0 commits.
  error.clear();
  if (rank == 0) {
    try {
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
        for (const auto& s : t["shards"]) {
          const std::string name = s["name"];
          auto [it, inserted] = manifest.tensors.try_emplace(name);
          TensorEntry& entry = it->second;
          const auto dtype = DtypeFromName(s["dtype"]);
          const auto shape = s["shape"].get<std::vector<int64_t>>();
          if (inserted) {
            entry.dtype = dtype;
            entry.shape = shape;
          } else if (entry.dtype != dtype || entry.shape != shape) {
            throw CheckpointError("tensor '" + name + "': rank " + std::to_string(t["rank"].get<int>()) +
                                  " saved it as " + DtypeName(dtype) + " of shape " + nlohmann::json(shape).dump() +
                                  ", another rank as " + DtypeName(entry.dtype) + " of shape " +
                                  nlohmann::json(entry.shape).dump());
          }
          entry.shards.push_back({file, s["offset"], s["numel"], s["file_offset"]});
        }
      }
      manifest.Validate(what);
      ReplaceFileAtomically(partial / kManifestFileName, manifest.ToJson().dump(1));
      if (options_.on_stage) options_.on_stage("manifest_written");
      Publish(partial, final_dir);
      SyncDirectory(root_);
      WriteLatest(root_, metadata.step);
      PruneCheckpoints(root_, options_.keep);
    } catch (const std::exception& e) {
      error = e.what();
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
