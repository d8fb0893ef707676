#include <spdlog/spdlog.h>

#include "worker/checkpoint/checkpoint_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "worker/checkpoint/checkpoint_format.h"

namespace headroom::worker {
namespace {

class ReadOnlyFile {
 public:
  explicit ReadOnlyFile(const std::filesystem::path& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw CheckpointError("cannot open " + path.string() + ": " + std::strerror(errno));
  }
  ~ReadOnlyFile() { ::close(fd_); }
  void ReadAt(void* out, size_t size, int64_t offset) const {
    const int64_t start = offset;
    char* p = static_cast<char*>(out);
    while (size > 0) {
      ssize_t n = ::pread(fd_, p, size, offset);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        throw CheckpointError("cannot read " + std::to_string(size) + " bytes at offset " + std::to_string(offset) +
                              " of " + path_.string() + ": " + (n == 0 ? "file is truncated" : std::strerror(errno)));
      }
      p += n;
      size -= static_cast<size_t>(n);
      offset += n;
    }
    // The bytes are in `out` now; their page cache is charged to this process's memory
    // cgroup, whose working set is what the memory guard watches. Pages another rank
    // reads too (every rank reads all parameters below stage 3) turn active and count
    // as working set, so a resume would look like model state that does not exist.
    // Best effort: a failure only leaves the cache to the kernel.
    ::posix_fadvise(fd_, start, static_cast<off_t>(offset - start), POSIX_FADV_DONTNEED);
  }

 private:
  std::filesystem::path path_;
  int fd_;
};

}  // namespace

CheckpointReader::CheckpointReader(std::filesystem::path step_dir)
    : dir_(std::move(step_dir)), manifest_(CheckpointManifest::Read(dir_)) {}

std::optional<CheckpointReader> CheckpointReader::OpenLatest(const std::filesystem::path& root) {
  auto dir = LatestCheckpoint(root);
  if (!dir) return std::nullopt;
  return CheckpointReader(*dir);
}

void CheckpointReader::RequireSpecHash(const std::string& expected) const {
  if (manifest_.spec_hash == expected) return;
  throw CheckpointError("checkpoint " + dir_.string() + " belongs to a different run: it was saved with spec hash " +
                        manifest_.spec_hash + ", this job's spec hash is " + expected +
                        ". The hash covers what defines the run (model, task, seed and the GRPO "
                        "hyper-parameters); a resume may change only workers, microBatchSize, maxTokensPerMicroBatch, "
                        "sharding stage and offload. Restore the original spec, or use a new checkpoint directory.");
}

const TensorEntry& CheckpointReader::Entry(const std::string& name) const {
  auto it = manifest_.tensors.find(name);
  if (it == manifest_.tensors.end()) {
    throw CheckpointError("checkpoint " + dir_.string() + " has no tensor '" + name + "'");
  }
  return it->second;
}

torch::Tensor CheckpointReader::ReadRange(const std::string& name, int64_t begin, int64_t end) const {
  torch::Tensor out = torch::empty({std::max<int64_t>(end - begin, 0)}, DtypeFromName(Entry(name).dtype));
  ReadRangeInto(name, begin, out);
  return out;
}

void CheckpointReader::ReadRangeInto(const std::string& name, int64_t begin, torch::Tensor& out) const {
  const TensorEntry& entry = Entry(name);
  const int64_t end = begin + out.numel();
  if (begin < 0 || end > entry.numel()) {
    throw CheckpointError("checkpoint " + dir_.string() + ": range [" + std::to_string(begin) + ", " +
                          std::to_string(end) + ") lies outside tensor '" + name + "' of " +
                          std::to_string(entry.numel()) + " elements");
  }
  if (out.scalar_type() != DtypeFromName(entry.dtype) || !out.device().is_cpu() || !out.is_contiguous()) {
    throw CheckpointError("checkpoint: ReadRangeInto('" + name + "') needs a contiguous CPU " + entry.dtype +
                          " tensor");
  }
  const int64_t element = checkpoint::ElementSize(entry.dtype);
  char* dst = static_cast<char*>(out.data_ptr());
  for (const auto& shard : entry.shards) {  // sorted by offset (Validate)
    const int64_t lo = std::max(begin, shard.offset);
    const int64_t hi = std::min(end, shard.offset + shard.numel);
    if (lo >= hi) continue;
    ReadOnlyFile file(dir_ / shard.file);
    file.ReadAt(dst + (lo - begin) * element, static_cast<size_t>((hi - lo) * element),
                shard.file_offset + (lo - shard.offset) * element);
  }
}

torch::Tensor CheckpointReader::ReadFull(const std::string& name) const {
  const TensorEntry& entry = Entry(name);
  return ReadRange(name, 0, entry.numel()).view(entry.shape);
}

std::optional<std::string> CheckpointReader::RngState(int rank) const {
  if (rank < 0 || rank >= static_cast<int>(manifest_.rng_state.size())) return std::nullopt;
  return manifest_.rng_state[rank];
}

}  // namespace headroom::worker
