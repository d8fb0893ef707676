// checkpoint_throughput DIR [MiB] [ranks-simulated]: saves MiB of float32 state through
// CheckpointWriter (one rank, the local communicator) and writes the same bytes with a
// plain write+fsync, both into DIR, and prints both speeds and their ratio as JSON.
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/checkpoint/durable_file.h"

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
    DurableFile file(dir / "baseline.bin");
    file.Write(state.data_ptr(), static_cast<size_t>(state.numel()) * 4);
    file.Sync();
    file.Close();
  }
  const double raw_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - raw_start).count();
  std::filesystem::remove(dir / "baseline.bin");

  auto comm = MakeLocalCommunicator();
  CheckpointWriter writer(dir / "checkpoints", *comm);
  CheckpointMetadata metadata;
  metadata.step = 1;
  auto stats = writer.Save(metadata, {WholeTensor("state", state)}, "");
  const double mb = static_cast<double>(stats.total_bytes) / 1e6;
  std::printf(
      "{\"bytes\": %llu, \"checkpoint_seconds\": %.3f, \"checkpoint_mb_per_s\": %.1f, "
      "\"raw_seconds\": %.3f, \"raw_mb_per_s\": %.1f, \"ratio\": %.2f}\n",
      static_cast<unsigned long long>(stats.total_bytes), stats.seconds, mb / stats.seconds, raw_seconds,
      mb / raw_seconds, raw_seconds / stats.seconds);
  std::filesystem::remove_all(dir / "checkpoints");
  return 0;
}
