// checkpoint_throughput DIR [MiB] [ranks-simulated]: saves MiB of float32 state through
// CheckpointWriter (one rank, the local communicator: hashed, fsync'd, read back and
// verified) and writes the same bytes with a plain write+fsync, both into DIR, and prints
// both speeds and their ratio as JSON.
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/checkpoint/checkpoint_format.h"

int main(int argc, char** argv) {
  using namespace headroom::worker;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [MiB]\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const int64_t mib = argc > 2 ? std::atoll(argv[2]) : 256;
  const int64_t elements = mib * (1 << 20) / 4;
  std::filesystem::create_directories(dir);
  torch::Tensor state = torch::rand({elements});

  // Baseline: the disk's sequential write + fsync of the same bytes.
  const auto raw_start = std::chrono::steady_clock::now();
  {
    // Plain POSIX calls: DurableFile would also hash the bytes, which the baseline must not.
    const int fd = ::open((dir / "baseline.bin").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const char* p = static_cast<const char*>(state.data_ptr());
    for (size_t left = static_cast<size_t>(state.numel()) * 4; left > 0;) {
      const ssize_t n = ::write(fd, p, left);
      if (n <= 0) {
        std::perror("baseline write");
        return 1;
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    ::fsync(fd);
    ::close(fd);
  }
  const double raw_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - raw_start).count();
  std::filesystem::remove(dir / "baseline.bin");

  auto comm = MakeLocalCommunicator();
  CheckpointWriter writer(dir / "checkpoints", *comm);
  CheckpointMetadata metadata;
  metadata.step = 1;
  auto stats = writer.Save(metadata, {WholeTensor("state", state)}, "");
  const double mb = static_cast<double>(stats.total_bytes) / 1e6;
  std::printf("{\"bytes\": %llu, \"checkpoint_seconds\": %.3f, \"checkpoint_mb_per_s\": %.1f, "
              "\"raw_seconds\": %.3f, \"raw_mb_per_s\": %.1f, \"ratio\": %.2f}\n",
              static_cast<unsigned long long>(stats.total_bytes), stats.seconds, mb / stats.seconds, raw_seconds,
              mb / raw_seconds, raw_seconds / stats.seconds);
  std::filesystem::remove_all(dir / "checkpoints");
  return 0;
}
