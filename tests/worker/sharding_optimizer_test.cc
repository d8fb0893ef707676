// ZeRO stages 0-3 over 1-3 Gloo ranks against single-process torch::optim::AdamW with
// torch::nn::utils::clip_grad_norm_ on the same total gradient: the parameters after
// several steps agree within fp32 rounding (the gradient sum and the norm are summed in
// a different order; the update itself is element-wise).
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/worker/helpers/fp32_tolerance.h"
#include "tests/worker/helpers/multirank.h"
#include "tests/worker/helpers/sharding_fixture.h"
#include "worker/comm/communicator_factory.h"
#include "worker/sharding/sharded_adamw.h"

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

#ifdef HEADROOM_HAVE_GLOO
#define REQUIRE_GLOO()
#else
#define REQUIRE_GLOO() GTEST_SKIP() << "built without Gloo"
#endif

constexpr int kSteps = 4;
constexpr double kLr = 0.05;

// Runs `world` ranks at `options`; each rank also runs the single-process reference
// itself (cheap) and compares after every step.
void MatchesTorchAdamW(int world, ShardingOptions options) {
  const int port = FreePort();
  auto results = RunRanks(
      world,
      [&](const RankContext& ctx) {
    torch::set_num_threads(1);
    auto comm =
        world == 1 ? MakeLocalCommunicator() : MakeCommunicator("gloo", ctx.rank, world, "127.0.0.1", port, 20s);
    // Different seeds per rank: the group must start everyone from rank 0's values.
    auto params = MakeOddParams(100 + ctx.rank);
    FlatParameterGroup group(params, *comm, options);
    AdamWConfig config;
    config.lr = kLr;
    ShardedAdamW optimizer(group, config);

    auto reference = MakeOddParams(100);
    std::vector<torch::Tensor> ref_tensors;
    for (auto& [n, p] : reference) ref_tensors.push_back(p);
    torch::optim::AdamW ref_opt(ref_tensors, torch::optim::AdamWOptions(kLr).weight_decay(0.01));

    for (int step = 0; step < kSteps; ++step) {
      group.Gather();
      group.ZeroGrad();
      RankLoss(params, step, ctx.rank).backward();
      group.ReduceGradients();
      if (options.stage >= 2) {
        for (const auto& [n, p] : params) Expect(!p.grad().defined(), "stage >= 2 keeps a full gradient after reduce");
      }
      const double norm = optimizer.Step(1.0);
      if (options.stage == 3) {
        for (const auto& [n, p] : params) Expect(p.numel() == 0, "stage 3 parameters not released after the step");
      }

      ref_opt.zero_grad();
      for (int r = 0; r < world; ++r) RankLoss(reference, step, r).backward();
      const double ref_norm = torch::nn::utils::clip_grad_norm_(ref_tensors, 1.0);
      ref_opt.step();

      // The norm sums the squares of every element (53), each gradient a sum over the ranks,
      // in another order than the reference's (helpers/fp32_tolerance.h).
      const double norm_tolerance =
          headroom::testing::SummationTolerance(ref_norm, headroom::testing::Concat(reference).numel(), 2);
      Expect(std::abs(norm - ref_norm) <= norm_tolerance,
             "step " + std::to_string(step) + ": norm " + std::to_string(norm) + " vs " + std::to_string(ref_norm));
      group.Gather();
      auto got = headroom::testing::Concat(params);
      auto want = headroom::testing::Concat(reference);
      const double diff = (got - want).abs().max().item<double>();
      Expect(torch::allclose(got, want, 1e-5, 1e-6),
             "step " + std::to_string(step) + ": max |param - torch AdamW| = " + std::to_string(diff));
      group.Release();
    }
    Expect(optimizer.step() == kSteps, "step count");
      },
      60s);
  for (const auto& r : results) EXPECT_TRUE(r.exited && r.exit_code == 0) << Describe(results);
}

ShardingOptions Stage(int stage) {
  ShardingOptions o;
  o.stage = stage;
  o.bucket_numel = 7;  // several buckets, one that splits a tensor and a shard
  return o;
}

TEST(ShardedAdamWTest, SingleRankEveryStageMatchesTorch) {
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    MatchesTorchAdamW(1, Stage(stage));
  }
}

TEST(ShardedAdamWTest, TwoRanksEveryStageMatchesTorch) {
  REQUIRE_GLOO();
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    MatchesTorchAdamW(2, Stage(stage));
  }
}

TEST(ShardedAdamWTest, ThreeRanksEveryStageMatchesTorch) {
  REQUIRE_GLOO();
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    MatchesTorchAdamW(3, Stage(stage));
  }
}

// On CPU the offload flags keep everything where it already is: same numbers.
TEST(ShardedAdamWTest, OffloadOnCpuChangesNothing) {
  REQUIRE_GLOO();
  ShardingOptions o = Stage(3);
  o.offload_params = true;
  o.offload_optimizer = true;
  MatchesTorchAdamW(2, o);
  o.stage = 2;
  MatchesTorchAdamW(2, o);
}

}  // namespace
}  // namespace headroom::worker
