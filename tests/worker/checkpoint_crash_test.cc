// kill -9 while a checkpoint is being written: the previous step stays what `latest`
// names, is what a resume chooses, and holds exactly its data; the next save cleans up
// the wreck.
// The writer runs in a forked child that is SIGKILLed at three points: in the middle of
// writing its data, after its data is durable, and after the manifest is written but
// before `latest` moves.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <csignal>
#include <cstring>

#include "tests/worker/helpers/multirank.h"
#include "worker/checkpoint/checkpoint_format.h"
#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/checkpoint/intact_checkpoint.h"

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;
using headroom::testing::Describe;
using headroom::testing::RankContext;
using headroom::testing::RunRanks;

constexpr int64_t kBigElements = int64_t{48} << 20;  // 192 MiB of float32: slow enough to interrupt

torch::Tensor Weights(int64_t step, int64_t n) {
  return torch::arange(n, torch::kFloat32) * 0.5f + static_cast<float>(step);
}

void Save(const fs::path& root, int64_t step, int64_t n, std::function<void(const std::string&)> on_stage = {}) {
  auto comm = MakeLocalCommunicator();
  CheckpointWriterOptions options;
  options.on_stage = std::move(on_stage);
  CheckpointWriter writer(root, *comm, options);
  CheckpointMetadata metadata;
  metadata.step = step;
  metadata.spec_hash = "h";
  writer.Save(metadata, {WholeTensor("w", Weights(step, n))}, "rng");
}

class CheckpointCrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("headroom-crash-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    auto first = RunRanks(1, [&](const RankContext&) {
      torch::set_num_threads(1);
      Save(root_, 10, 1000);
    });
    ASSERT_EQ(first[0].exit_code, 0) << Describe(first);
  }
  void TearDown() override { fs::remove_all(root_); }

  // The previous step is intact and a new save succeeds and removes the wreck.
  void ExpectPreviousStepIntact() {
    EXPECT_TRUE(fs::exists(root_ / "step-000020.partial")) << "the crash left no partial step to clean";
    auto check = RunRanks(1, [&](const RankContext&) {
      torch::set_num_threads(1);
      auto comm = MakeLocalCommunicator();
      auto reader = OpenNewestIntactCheckpoint(root_, *comm);  // what a resume reads
      if (!reader || reader->step() != 10) throw std::runtime_error("latest is not step 10");
      auto w = reader->ReadFull("w");
      auto expected = Weights(10, 1000);
      if (std::memcmp(w.data_ptr(), expected.data_ptr(), 1000 * sizeof(float)) != 0) {
        throw std::runtime_error("step 10's data changed");
      }
      Save(root_, 30, 1000);
      if (CheckpointReader::OpenLatest(root_)->step() != 30) throw std::runtime_error("step 30 not latest");
    });
    ASSERT_EQ(check[0].exit_code, 0) << Describe(check);
    EXPECT_FALSE(fs::exists(root_ / "step-000020.partial"));
    EXPECT_EQ(CompleteSteps(root_), std::vector<int64_t>({10, 30}));
  }

  fs::path root_;
};

TEST_F(CheckpointCrashTest, KilledWhileWritingData) {
  const fs::path rank_file = root_ / "step-000020.partial" / "rank-00000.bin";
  auto results = RunRanks(
      1,
      [&](const RankContext&) {
        torch::set_num_threads(1);
        Save(root_, 20, kBigElements);
      },
      std::chrono::seconds(60),
      [&](const std::vector<pid_t>& pids) {
        // Kill as soon as some, but not all, of the data has reached the file.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        std::error_code ec;
        while (std::chrono::steady_clock::now() < deadline) {
          if (fs::exists(rank_file, ec) && fs::file_size(rank_file, ec) > 0) break;
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        ::kill(pids[0], SIGKILL);
      });
  ASSERT_EQ(results[0].signal, SIGKILL) << Describe(results);
  std::error_code ec;
  EXPECT_LT(fs::file_size(rank_file, ec), static_cast<uintmax_t>(kBigElements * 4)) << "killed too late to test";
  ExpectPreviousStepIntact();
}

TEST_F(CheckpointCrashTest, KilledAfterDataIsDurable) {
  auto results = RunRanks(1, [&](const RankContext&) {
    Save(root_, 20, 1000, [](const std::string& stage) {
      if (stage == "rank_file_written") ::raise(SIGKILL);
    });
  });
  ASSERT_EQ(results[0].signal, SIGKILL) << Describe(results);
  ExpectPreviousStepIntact();
}

TEST_F(CheckpointCrashTest, KilledAfterManifestBeforeLatestMoves) {
  auto results = RunRanks(1, [&](const RankContext&) {
    Save(root_, 20, 1000, [](const std::string& stage) {
      if (stage == "manifest_written") ::raise(SIGKILL);
    });
  });
  ASSERT_EQ(results[0].signal, SIGKILL) << Describe(results);
  EXPECT_TRUE(fs::exists(root_ / "step-000020.partial" / "manifest.json"));
  ExpectPreviousStepIntact();
}

}  // namespace
}  // namespace headroom::worker
