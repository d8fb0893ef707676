// Sharded state through a reshardable checkpoint: saved by 2 ranks at stage 2, loaded by
// 3 ranks at stage 1, 3 ranks at stage 3 and 1 rank at stage 0, the parameters and both
// AdamW moments come back bit for bit, with the step count. A model whose shapes differ
// from the checkpoint's is refused naming the tensor.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/worker/helpers/multirank.h"
#include "tests/worker/helpers/sharding_fixture.h"
#include "worker/comm/communicator_factory.h"
#include "worker/sharding/sharded_state_checkpoint.h"

namespace headroom::worker {
namespace {

using headroom::testing::Describe;
using headroom::testing::Expect;
using headroom::testing::FreePort;
using headroom::testing::MakeOddParams;
using headroom::testing::RankContext;
using headroom::testing::RankLoss;
using headroom::testing::RunRanks;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::unique_ptr<Communicator> Connect(int rank, int world, int port) {
  return world == 1 ? MakeLocalCommunicator() : MakeCommunicator("gloo", rank, world, "127.0.0.1", port, 20s);
}

// The full moments of `optimizer` (gathered when sharded), unpadded.
torch::Tensor FullMoment(const torch::Tensor& local, FlatParameterGroup& group, const ShardedAdamW& optimizer) {
  if (group.stage() == 0) return local.narrow(0, 0, group.layout().numel());
  auto full = torch::empty({group.layout().padded_numel()}, local.options());
  group.comm().all_gather(local, full);
  (void)optimizer;
  return full.narrow(0, 0, group.layout().numel());
}

// Rank 0 writes parameters, exp_avg, exp_avg_sq and the step to `path` as raw bytes.
void Dump(const std::string& path, const headroom::testing::NamedParams& params, FlatParameterGroup& group,
          const ShardedAdamW& optimizer) {
  group.Gather();
  auto p = headroom::testing::Concat(params);
  auto m = FullMoment(optimizer.exp_avg(), group, optimizer);
  auto v = FullMoment(optimizer.exp_avg_sq(), group, optimizer);
  if (group.comm().rank() == 0) {
    fs::remove(path);
    headroom::testing::WriteBytes(path, p);
    headroom::testing::WriteBytes(path, m);
    headroom::testing::WriteBytes(path, v);
    headroom::testing::WriteBytes(path, torch::tensor({optimizer.step()}, torch::kInt64));
  }
  group.Release();
}

std::string ReadAll(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void RunWorld(int world, const std::function<void(const RankContext&, Communicator&)>& body) {
  const int port = FreePort();
  auto results = RunRanks(
      world,
      [&](const RankContext& ctx) {
    torch::set_num_threads(1);
    auto comm = Connect(ctx.rank, world, port);
    body(ctx, *comm);
      },
      60s);
  for (const auto& r : results) ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(results);
}

ShardingOptions Stage(int stage) {
  ShardingOptions o;
  o.stage = stage;
  o.bucket_numel = 5;
  return o;
}

void LoadAndDump(int world, int stage, const fs::path& root, const fs::path& out) {
  RunWorld(world, [&](const RankContext&, Communicator& comm) {
    auto params = MakeOddParams(7);  // different values: loading must replace them all
    FlatParameterGroup group(params, comm, Stage(stage));
    ShardedAdamW optimizer(group, {});
    auto reader = CheckpointReader::OpenLatest(root);
    Expect(reader.has_value(), "no checkpoint under " + root.string());
    reader->RequireSpecHash("hash-1");
    LoadShardedState(*reader, {{&group, &optimizer}});
    Dump(out.string(), params, group, optimizer);
  });
}

TEST(ShardedStateCheckpointTest, SavedByTwoAtStage2LoadsOnThreeAndOneAtAnyStage) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  const fs::path root = fs::temp_directory_path() / ("headroom-sharding-ckpt-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);

  RunWorld(2, [&](const RankContext& ctx, Communicator& comm) {
    auto params = MakeOddParams(3);
    FlatParameterGroup group(params, comm, Stage(2));
    AdamWConfig config;
    config.lr = 0.05;
    ShardedAdamW optimizer(group, config);
    for (int step = 0; step < 3; ++step) {
      group.ZeroGrad();
      RankLoss(params, step, ctx.rank).backward();
      group.ReduceGradients();
      optimizer.Step(1.0);
    }
    CheckpointMetadata meta;
    meta.step = 3;
    meta.spec_hash = "hash-1";
    CheckpointWriter(root, comm)
        .Save(meta, ShardedStateSlices({{&group, &optimizer}}), "rng-" + std::to_string(ctx.rank));
    Dump((root / "saved.bin").string(), params, group, optimizer);
  });
  if (HasFatalFailure()) return;
  const std::string saved = ReadAll(root / "saved.bin");
  ASSERT_EQ(saved.size(), 53 * 4 * 3 + 8u);

  for (auto [world, stage] : {std::pair{3, 1}, std::pair{3, 3}, std::pair{1, 0}, std::pair{2, 2}}) {
    SCOPED_TRACE("world " + std::to_string(world) + " stage " + std::to_string(stage));
    const fs::path out = root / ("loaded-" + std::to_string(world) + "-" + std::to_string(stage) + ".bin");
    LoadAndDump(world, stage, root, out);
    if (HasFatalFailure()) return;
    EXPECT_TRUE(ReadAll(out) == saved) << "parameters/moments/step differ after loading";
  }
  fs::remove_all(root);
}

TEST(ShardedStateCheckpointTest, ShapeMismatchIsRefusedNamingTheTensor) {
  const fs::path root = fs::temp_directory_path() / ("headroom-sharding-shape-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  RunWorld(1, [&](const RankContext&, Communicator& comm) {
    auto params = MakeOddParams(3);
    FlatParameterGroup group(params, comm, Stage(0));
    ShardedAdamW optimizer(group, {});
    CheckpointMetadata meta;
    meta.step = 1;
    meta.spec_hash = "h";
    CheckpointWriter(root, comm).Save(meta, ShardedStateSlices({{&group, &optimizer}}), "");

    headroom::testing::NamedParams other = {{"a.weight", torch::zeros({7, 5}, torch::requires_grad())}};
    FlatParameterGroup wrong(other, comm, Stage(0));
    ShardedAdamW wrong_opt(wrong, {});
    try {
      LoadShardedState(*CheckpointReader::OpenLatest(root), {{&wrong, &wrong_opt}});
      throw std::runtime_error("loaded a [7, 5] model from a [5, 7] checkpoint");
    } catch (const CheckpointError& e) {
      const std::string what = e.what();
      Expect(what.find("model.a.weight") != std::string::npos && what.find("[5, 7]") != std::string::npos,
             "unclear error: " + what);
    }
  });
  fs::remove_all(root);
}

}  // namespace
}  // namespace headroom::worker
