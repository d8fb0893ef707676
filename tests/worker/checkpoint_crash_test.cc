// kill -9 while a checkpoint is being written: the previous step stays what `latest`
// names, is what a resume chooses, and holds exactly its data; the next save cleans up
// the wreck.
// The writer runs in a forked child that is SIGKILLed at four points: in the middle of
// writing its data, after its data is durable, after the manifest is written, and after
// the step is renamed into place but before `latest` moves.
// A save that fails instead (the file-size limit of the process, a full tmpfs) removes
// its step-N.partial itself, and leaves the previous step and `latest` as they were.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sys/mount.h>
#include <sys/resource.h>

#include <cerrno>
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

// What a resume reads in `root` is step 10 with its data unchanged, and a later save works.
void ExpectStep10ResumedAndStep30Saved(const fs::path& root) {
  auto check = RunRanks(1, [&](const RankContext&) {
    torch::set_num_threads(1);
    auto comm = MakeLocalCommunicator();
    auto reader = OpenNewestIntactCheckpoint(root, *comm);  // what a resume reads
    if (!reader || reader->step() != 10) throw std::runtime_error("latest is not step 10");
    auto w = reader->ReadFull("w");
    auto expected = Weights(10, 1000);
    if (std::memcmp(w.data_ptr(), expected.data_ptr(), 1000 * sizeof(float)) != 0) {
      throw std::runtime_error("step 10's data changed");
    }
    Save(root, 30, 1000);
    if (CheckpointReader::OpenLatest(root)->step() != 30) throw std::runtime_error("step 30 not latest");
  });
  ASSERT_EQ(check[0].exit_code, 0) << Describe(check);
  EXPECT_FALSE(fs::exists(root / "step-000020.partial"));
  EXPECT_EQ(CompleteSteps(root), std::vector<int64_t>({10, 30}));
}

// A failed save of step 20 left nothing: no partial step, step 10 still `latest`.
void ExpectNothingLeftOfStep20(const fs::path& root) {
  EXPECT_FALSE(fs::exists(root / "step-000020.partial")) << "the failed save left its partial step";
  EXPECT_FALSE(fs::exists(root / "step-000020"));
  EXPECT_EQ(CompleteSteps(root), std::vector<int64_t>({10}));
  EXPECT_EQ(CheckpointReader::OpenLatest(root)->step(), 10);
}

class CheckpointCrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("headroom-crash-" + std::to_string(::getpid()) + "-" +
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
    ExpectStep10ResumedAndStep30Saved(root_);
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

TEST_F(CheckpointCrashTest, KilledAfterPublishBeforeLatestMoves) {
  auto results = RunRanks(1, [&](const RankContext&) {
    Save(root_, 20, 1000, [](const std::string& stage) {
      if (stage == "published") ::raise(SIGKILL);
    });
  });
  ASSERT_EQ(results[0].signal, SIGKILL) << Describe(results);
  EXPECT_FALSE(fs::exists(root_ / "step-000020.partial"));
  EXPECT_EQ(CheckpointReader::OpenLatest(root_)->step(), 10) << "`latest` moved before the kill";
  // Step 20 is complete and verified: a resume may take it, and it holds step 20's data.
  auto check = RunRanks(1, [&](const RankContext&) {
    auto comm = MakeLocalCommunicator();
    auto reader = OpenNewestIntactCheckpoint(root_, *comm);
    if (!reader || (reader->step() != 10 && reader->step() != 20)) throw std::runtime_error("no step 10 or 20");
    auto expected = Weights(reader->step(), 1000);
    if (std::memcmp(reader->ReadFull("w").data_ptr(), expected.data_ptr(), 1000 * sizeof(float)) != 0) {
      throw std::runtime_error("the step resumed holds other data");
    }
  });
  EXPECT_EQ(check[0].exit_code, 0) << Describe(check);
}

// The process may write no file larger than 1 MiB (RLIMIT_FSIZE, set in the child only):
// its 4 MiB tensor file fails with EFBIG part way, as a write error on any storage would.
TEST_F(CheckpointCrashTest, ASaveThatFailsToWriteRemovesItsPartialStep) {
  auto results = RunRanks(1, [&](const RankContext& ctx) {
    ::signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of killing the process
    const rlimit limit{1 << 20, 1 << 20};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) throw std::runtime_error("setrlimit failed");
    Save(root_, 20, 1 << 20);
    ctx.Report("step 20 was saved despite the file-size limit");
  });
  ASSERT_EQ(results[0].exit_code, 1) << Describe(results);
  EXPECT_NE(results[0].message.find(std::strerror(EFBIG)), std::string::npos) << results[0].message;
  ExpectNothingLeftOfStep20(root_);
  ExpectStep10ResumedAndStep30Saved(root_);
}

// A real full filesystem: a 2 MiB tmpfs holds step 10 (4 KB) but not step 20 (4 MiB).
TEST(CheckpointDiskFullTest, ASaveOnAFullDiskRemovesItsPartialStepAndResumesAfterSpaceReturns) {
  const fs::path root = fs::temp_directory_path() / ("headroom-diskfull-" + std::to_string(::getpid()));
  fs::create_directories(root);
  if (::mount("tmpfs", root.c_str(), "tmpfs", 0, "size=2m") != 0) {
    const std::string why = std::strerror(errno);
    fs::remove_all(root);
    GTEST_SKIP() << "cannot mount a tmpfs at " << root << " (" << why << "; needs CAP_SYS_ADMIN)";
  }
  auto results = RunRanks(1, [&](const RankContext& ctx) {
    torch::set_num_threads(1);
    Save(root, 10, 1000);
    try {
      Save(root, 20, 1 << 20);
    } catch (const CheckpointError& e) {
      ctx.Report(e.what());
      return;
    }
    throw std::runtime_error("step 20 was saved on a full 2 MiB tmpfs");
  });
  ASSERT_EQ(results[0].exit_code, 0) << Describe(results);
  EXPECT_NE(results[0].message.find(std::strerror(ENOSPC)), std::string::npos) << results[0].message;
  ExpectNothingLeftOfStep20(root);
  // Space returns (the tmpfs grows): a resume reads step 10 and the next save succeeds.
  EXPECT_EQ(::mount("tmpfs", root.c_str(), "tmpfs", MS_REMOUNT, "size=16m"), 0) << std::strerror(errno);
  ExpectStep10ResumedAndStep30Saved(root);
  ::umount2(root.c_str(), MNT_DETACH);
  fs::remove_all(root);
}

}  // namespace
}  // namespace headroom::worker
