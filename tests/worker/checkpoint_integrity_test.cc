// Damage to saved checkpoints, injected at named points: a truncated file and a flipped
// bit in the newest step make a resume fall back to the newest intact step (warned about,
// the damaged one set aside as step-N.corrupt, `latest` pointed at the one chosen), with 1
// rank and with 2 ranks that each verify half of the files; with no intact step the
// resume refuses, naming every file at fault; and storage that loses bytes while a step is
// saved fails that save, leaving the previous step (the only copy of its training, keep 1)
// in place.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <fstream>

#include "tests/worker/helpers/multirank.h"
#include "worker/checkpoint/checkpoint_format.h"
#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/checkpoint/intact_checkpoint.h"
#include "worker/comm/communicator_factory.h"

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;
using headroom::testing::Describe;
using headroom::testing::FreePort;
using headroom::testing::RankContext;
using headroom::testing::RunRanks;
using namespace std::chrono_literals;

constexpr int64_t kElements = 1000;

torch::Tensor Weights(int64_t step) { return torch::arange(kElements, torch::kFloat32) + static_cast<float>(step); }

std::unique_ptr<Communicator> Comm(const RankContext& ctx, int world, int port) {
  return world == 1 ? MakeLocalCommunicator() : MakeCommunicator("gloo", ctx.rank, world, "127.0.0.1", port, 10s);
}

// Step `step` from `world` ranks, each saving its even share of the weights.
void Save(const fs::path& root, Communicator& comm, int64_t step, int keep = 10,
          std::function<void(const std::string&)> on_stage = {}) {
  CheckpointWriterOptions options;
  options.keep = keep;
  options.on_stage = std::move(on_stage);
  CheckpointWriter writer(root, comm, options);
  CheckpointMetadata metadata;
  metadata.step = step;
  metadata.spec_hash = "h";
  writer.Save(metadata, {EvenSliceOf("w", Weights(step), comm.rank(), comm.world_size())}, "rng");
}

void FlipBit(const fs::path& file, int64_t at) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x04;
  f.seekp(at);
  f.write(&c, 1);
}

class CheckpointIntegrityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("headroom-integrity-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Saves steps 10 and 20 from `world` ranks, damages step 20 with `damage`, then resumes
  // on `world` ranks: every rank must choose step 10 and read its data back exactly.
  void ExpectFallbackToStep10(int world, const std::function<void()>& damage) {
    const int port = FreePort();
    auto saved = RunRanks(world, [&](const RankContext& ctx) {
      torch::set_num_threads(1);
      auto comm = Comm(ctx, world, port);
      Save(root_, *comm, 10);
      Save(root_, *comm, 20);
    });
    for (const auto& r : saved) ASSERT_EQ(r.exit_code, 0) << Describe(saved);
    damage();
    const int port2 = FreePort();
    auto resumed = RunRanks(world, [&](const RankContext& ctx) {
      torch::set_num_threads(1);
      auto comm = Comm(ctx, world, port2);
      auto reader = OpenNewestIntactCheckpoint(root_, *comm);
      if (!reader || reader->step() != 10) throw std::runtime_error("did not fall back to step 10");
      if (!torch::equal(reader->ReadFull("w"), Weights(10))) throw std::runtime_error("step 10's data differs");
    });
    for (const auto& r : resumed) ASSERT_EQ(r.exit_code, 0) << Describe(resumed);
    EXPECT_TRUE(fs::exists(root_ / "step-000020.corrupt" / "manifest.json")) << "the damaged step is kept aside";
    EXPECT_FALSE(fs::exists(root_ / "step-000020"));
    EXPECT_EQ(ReadWholeFile(root_ / kLatestFileName), "step-000010\n");
    EXPECT_EQ(CompleteSteps(root_), std::vector<int64_t>({10}));
  }

  fs::path root_;
};

TEST_F(CheckpointIntegrityTest, ATruncatedNewestStepFallsBackToThePreviousOne) {
  ExpectFallbackToStep10(1, [&] { fs::resize_file(root_ / "step-000020" / "rank-00000.bin", 1000); });
}

TEST_F(CheckpointIntegrityTest, ABitFlipInTheNewestStepFallsBackToThePreviousOne) {
  ExpectFallbackToStep10(1, [&] { FlipBit(root_ / "step-000020" / "rank-00000.bin", 777); });
}

// With two ranks, rank 1 alone hashes rank-00001.bin: its finding must reach rank 0 so
// both resume from the same step.
TEST_F(CheckpointIntegrityTest, TwoRanksAgreeOnTheFallbackWhenOnlyOneSeesTheDamage) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  ExpectFallbackToStep10(2, [&] { FlipBit(root_ / "step-000020" / "rank-00001.bin", 5); });
}

TEST_F(CheckpointIntegrityTest, WithNoIntactStepTheResumeRefusesNamingEachFile) {
  auto saved = RunRanks(1, [&](const RankContext&) {
    torch::set_num_threads(1);
    auto comm = MakeLocalCommunicator();
    Save(root_, *comm, 10);
    Save(root_, *comm, 20);
  });
  ASSERT_EQ(saved[0].exit_code, 0) << Describe(saved);
  FlipBit(root_ / "step-000010" / "rank-00000.bin", 0);
  fs::resize_file(root_ / "step-000020" / "rank-00000.bin", 3);
  auto comm = MakeLocalCommunicator();
  try {
    OpenNewestIntactCheckpoint(root_, *comm);
    FAIL() << "resumed from a damaged step";
  } catch (const CheckpointError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no intact step to resume from (2 tried)"), std::string::npos) << what;
    EXPECT_NE(what.find("step-000020: rank-00000.bin has 3 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("step-000010: rank-00000.bin is corrupt"), std::string::npos) << what;
  }
  EXPECT_TRUE(fs::exists(root_ / "step-000010.corrupt"));
  EXPECT_TRUE(fs::exists(root_ / "step-000020.corrupt"));
}

// keep 1: step 10 is the only copy of its training until step 20 is verified. Storage that
// loses a byte of step 20 after it was written (caught by the read-back) fails the save,
// and step 10 stays, named by `latest`.
TEST_F(CheckpointIntegrityTest, RotationKeepsThePreviousStepWhenTheNewOneDoesNotVerify) {
  auto results = RunRanks(1, [&](const RankContext&) {
    torch::set_num_threads(1);
    auto comm = MakeLocalCommunicator();
    Save(root_, *comm, 10, /*keep=*/1);
    try {
      Save(root_, *comm, 20, /*keep=*/1, [&](const std::string& stage) {
        if (stage == "rank_file_synced") FlipBit(root_ / "step-000020.partial" / "rank-00000.bin", 40);
      });
    } catch (const CheckpointError& e) {
      if (std::string(e.what()).find("reads back with sha256") == std::string::npos) throw;
      return;
    }
    throw std::runtime_error("the save of a step the storage damaged succeeded");
  });
  ASSERT_EQ(results[0].exit_code, 0) << Describe(results);
  EXPECT_EQ(CompleteSteps(root_), std::vector<int64_t>({10}));
  EXPECT_EQ(ReadWholeFile(root_ / kLatestFileName), "step-000010\n");
  auto reader = CheckpointReader::OpenLatest(root_);
  ASSERT_TRUE(reader.has_value());
  EXPECT_TRUE(torch::equal(reader->ReadFull("w"), Weights(10)));
}

}  // namespace
}  // namespace headroom::worker
