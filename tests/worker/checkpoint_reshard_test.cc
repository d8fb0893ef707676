// Checkpoints saved by N ranks and read back by M: bitwise-equal tensors for any split,
// the manifest's run state, retention, `latest`, and the validation errors.
// All torch work happens in forked children (tests/worker/helpers/multirank.h), so the
// test process never starts a thread pool before it forks.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <fstream>

#include "tests/worker/helpers/multirank.h"
#include "worker/checkpoint/checkpoint_format.h"
#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/comm/communicator_factory.h"

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;
using headroom::testing::Describe;
using headroom::testing::FreePort;
using headroom::testing::RankContext;
using headroom::testing::RunRanks;
using namespace std::chrono_literals;

// The model state every test saves: odd sizes so no split is even, several dtypes.
std::map<std::string, torch::Tensor> State(int64_t step) {
  torch::manual_seed(static_cast<uint64_t>(step));
  return {{"layers.0.weight", torch::randn({7, 5})},
          {"layers.0.bias", torch::randn({3}, torch::kFloat64)},
          {"optimizer.exp_avg", torch::randn({37}).to(torch::kBFloat16)},
          {"optimizer.step", torch::tensor({step}, torch::kInt64)}};
}

bool BitwiseEqual(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.numel() != b.numel()) return false;
  auto ca = a.contiguous();
  auto cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) == 0;
}

void Expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// Saves State(step) from `comm`'s rank: every tensor split evenly over the ranks, the
// step counter from rank 0 alone.
CheckpointSaveStats SaveState(const fs::path& root, Communicator& comm, int64_t step, int keep = 2,
                              const std::string& spec_hash = "hash-a",
                              std::function<void(const std::string&)> on_stage = {}) {
  std::vector<TensorSlice> slices;
  for (const auto& [name, tensor] : State(step)) {
    if (name == "optimizer.step") {
      if (comm.rank() == 0) slices.push_back(WholeTensor(name, tensor));
    } else {
      slices.push_back(EvenSliceOf(name, tensor, comm.rank(), comm.world_size()));
    }
  }
  CheckpointMetadata metadata;
  metadata.step = step;
  metadata.spec_hash = spec_hash;
  metadata.data_cursor = {{"next_prompt", step * 32}};
  metadata.guard_history = nlohmann::json::array({{{"step", step}, {"host_bytes", 123}}});
  metadata.extra = {{"micro_batch_size", 64}};
  CheckpointWriterOptions options;
  options.keep = keep;
  options.on_stage = std::move(on_stage);
  CheckpointWriter writer(root, comm, options);
  return writer.Save(metadata, slices, "rng-of-rank-" + std::to_string(comm.rank()));
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("headroom-ckpt-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Saves `step` from `world` Gloo ranks (or the local communicator for world 1).
  void SaveFrom(int world, int64_t step, int keep = 2) {
    const int port = FreePort();
    auto results = RunRanks(world, [&](const RankContext& ctx) {
      torch::set_num_threads(1);
      auto comm =
          world == 1 ? MakeLocalCommunicator() : MakeCommunicator("gloo", ctx.rank, world, "127.0.0.1", port, 10s);
      auto stats = SaveState(root_, *comm, step, keep);
      Expect(stats.bytes_written > 0 && stats.total_bytes >= stats.bytes_written, "stats");
    });
    for (const auto& r : results) ASSERT_EQ(r.exit_code, 0) << Describe(results);
  }

  // In `world` children, rank r reads its even range of every tensor and checks it.
  void LoadWith(int world, int64_t step) {
    auto results = RunRanks(world, [&](const RankContext& ctx) {
      torch::set_num_threads(1);
      auto reader = CheckpointReader::OpenLatest(root_);
      Expect(reader.has_value(), "no latest");
      Expect(reader->step() == step, "latest is step " + std::to_string(reader->step()));
      for (const auto& [name, tensor] : State(step)) {
        const int64_t n = tensor.numel();
        const int64_t begin = n * ctx.rank / world, end = n * (ctx.rank + 1) / world;
        auto part = reader->ReadRange(name, begin, end);
        Expect(BitwiseEqual(part, tensor.reshape({-1}).slice(0, begin, end)), name + " range differs");
        auto full = reader->ReadFull(name);
        Expect(full.sizes() == tensor.sizes() && BitwiseEqual(full, tensor), name + " full tensor differs");
      }
    });
    for (const auto& r : results) ASSERT_EQ(r.exit_code, 0) << Describe(results);
  }

  fs::path root_;
};

TEST_F(CheckpointTest, SavedWithTwoRanksLoadsWithThreeAndOneBitwise) {
  SaveFrom(2, 120);
  EXPECT_TRUE(fs::exists(root_ / "step-000120" / "manifest.json"));
  EXPECT_TRUE(fs::exists(root_ / "step-000120" / "rank-00000.bin"));
  EXPECT_TRUE(fs::exists(root_ / "step-000120" / "rank-00001.bin"));
  LoadWith(3, 120);
  LoadWith(1, 120);
}

TEST_F(CheckpointTest, SavedWithThreeRanksLoadsWithTwo) {
  SaveFrom(3, 7);
  LoadWith(2, 7);
}

TEST_F(CheckpointTest, ManifestCarriesRunStateAndPerRankRng) {
  SaveFrom(2, 40);
  auto results = RunRanks(1, [&](const RankContext&) {
    CheckpointReader reader(root_ / "step-000040");
    const auto& m = reader.manifest();
    Expect(m.world_size == 2 && m.spec_hash == "hash-a", "world size / hash");
    Expect(m.data_cursor["next_prompt"] == 40 * 32, "data cursor");
    Expect(m.guard_history[0]["host_bytes"] == 123, "guard history");
    Expect(m.extra["micro_batch_size"] == 64, "extra");
    Expect(reader.RngState(0) == "rng-of-rank-0" && reader.RngState(1) == "rng-of-rank-1", "rng");
    Expect(!reader.RngState(2).has_value(), "rank 2 did not exist");
    const auto& entry = reader.Entry("layers.0.weight");
    Expect(entry.dtype == "float32" && entry.shape == std::vector<int64_t>({7, 5}), "entry");
    Expect(entry.shards.size() == 2 && entry.shards[1].offset == 17 && entry.shards[1].numel == 18,
           "shards: " + reader.manifest().ToJson()["tensors"]["layers.0.weight"].dump());
    Expect(reader.Entry("optimizer.step").shards.size() == 1, "one shard for rank 0's tensor");
  });
  ASSERT_EQ(results[0].exit_code, 0) << Describe(results);
}

TEST_F(CheckpointTest, KeepsNewestStepsAndCleansStrays) {
  SaveFrom(1, 10);
  SaveFrom(1, 20);
  fs::create_directories(root_ / "step-000025.partial");  // a save that crashed
  fs::create_directories(root_ / "step-000015");          // a dir with no manifest
  SaveFrom(1, 30);
  EXPECT_FALSE(fs::exists(root_ / "step-000010"));
  EXPECT_TRUE(fs::exists(root_ / "step-000020" / "manifest.json"));
  EXPECT_TRUE(fs::exists(root_ / "step-000030" / "manifest.json"));
  EXPECT_FALSE(fs::exists(root_ / "step-000025.partial"));
  EXPECT_FALSE(fs::exists(root_ / "step-000015"));
  std::ifstream latest(root_ / "latest");
  std::string name;
  latest >> name;
  EXPECT_EQ(name, "step-000030");
  for (const auto& entry : fs::directory_iterator(root_)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
  EXPECT_EQ(CompleteSteps(root_), std::vector<int64_t>({20, 30}));
  LoadWith(1, 30);
}

TEST_F(CheckpointTest, SavingTheSameStepAgainReplacesIt) {
  SaveFrom(2, 50);
  SaveFrom(3, 50);  // resumed at 50 with another world size, drained before a step ran
  LoadWith(2, 50);
  auto results = RunRanks(1, [&](const RankContext&) {
    Expect(CheckpointReader(root_ / "step-000050").manifest().world_size == 3, "replaced");
    Expect(!fs::exists(root_ / "step-000050.partial"), "no partial left");
  });
  ASSERT_EQ(results[0].exit_code, 0) << Describe(results);
}

TEST_F(CheckpointTest, NoCheckpointIsNotAnError) {
  EXPECT_FALSE(LatestCheckpoint(root_).has_value());
  EXPECT_FALSE(CheckpointReader::OpenLatest(root_).has_value());
}

TEST_F(CheckpointTest, SpecHashMismatchIsRefusedNamingBoth) {
  SaveFrom(1, 10);
  CheckpointReader reader(root_ / "step-000010");
  EXPECT_NO_THROW(reader.RequireSpecHash("hash-a"));
  try {
    reader.RequireSpecHash("hash-b");
    FAIL() << "mismatch accepted";
  } catch (const CheckpointError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("saved with spec hash hash-a"), std::string::npos) << message;
    EXPECT_NE(message.find("this job's spec hash is hash-b"), std::string::npos) << message;
    EXPECT_NE(message.find("model, task, seed"), std::string::npos) << message;
  }
}

TEST_F(CheckpointTest, DamageIsNamed) {
  SaveFrom(2, 10);
  const fs::path step = root_ / "step-000010";
  // Truncated rank file.
  const auto size = fs::file_size(step / "rank-00001.bin");
  fs::resize_file(step / "rank-00001.bin", size - 4);
  try {
    CheckpointReader reader(step);
    FAIL() << "truncated file accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("rank-00001.bin has " + std::to_string(size - 4) +
                                         " bytes, the manifest "
                                         "recorded " +
                                         std::to_string(size) + " (truncated)"),
              std::string::npos)
        << e.what();
  }
  // Missing rank file.
  fs::remove(step / "rank-00001.bin");
  EXPECT_THROW(CheckpointReader{step}, CheckpointError);
  // Missing manifest.
  fs::remove(step / "manifest.json");
  try {
    CheckpointReader reader(step);
    FAIL() << "missing manifest accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("has no manifest.json"), std::string::npos) << e.what();
  }
  // A malformed `latest`.
  std::ofstream(root_ / "latest") << "../../etc\n";
  EXPECT_THROW(LatestCheckpoint(root_), CheckpointError);
}

TEST_F(CheckpointTest, RangeOutsideTensorIsNamed) {
  SaveFrom(1, 10);
  CheckpointReader reader(root_ / "step-000010");
  try {
    reader.ReadRange("layers.0.bias", 2, 4);
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("range [2, 4) lies outside tensor 'layers.0.bias' of 3 elements"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(reader.Entry("nope"), CheckpointError);
}

TEST_F(CheckpointTest, OverlappingSlicesFailOnEveryRankAndKeepThePreviousStep) {
  SaveFrom(2, 10);
  const int port = FreePort();
  auto results = RunRanks(2, [&](const RankContext& ctx) {
    torch::set_num_threads(1);
    auto comm = MakeCommunicator("gloo", ctx.rank, 2, "127.0.0.1", port, 10s);
    CheckpointWriter writer(root_, *comm);
    CheckpointMetadata metadata;
    metadata.step = 20;
    // Both ranks claim the whole tensor: the shards overlap.
    writer.Save(metadata, {WholeTensor("w", torch::ones({4}))}, "");
  });
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 1) << Describe(results);
  }
  EXPECT_NE(results[0].message.find("overlaps the previous one"), std::string::npos) << results[0].message;
  EXPECT_NE(results[1].message.find("rank 0 could not commit"), std::string::npos) << results[1].message;
  LoadWith(1, 10);
}

}  // namespace
}  // namespace headroom::worker
