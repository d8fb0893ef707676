// Per-rank model state in the real trainer falls with the stage and the world size as the
// planner says (core/guard/planner.h, what `headroom plan` prints): after a GRPO step, the
// trainer's sharded state holds the planned parameter, gradient and optimizer bytes for
// stages 0-3 on 1 and 2 Gloo ranks, up to the padding to a multiple of the world size
// (< world elements per buffer and group). Stage 3's in-step peak of parameters is the
// shards plus one gathered block (the planner's "gathered layer") plus the outer group
// (embeddings and head, which the plan does not count; small at this vocabulary). Prints
// both tables.
//
// "Measured" is ModelShards::ResidentBytes() (group buffers + AdamW moments) and its
// PeakBytes() over the step: tensor storage, not process RSS, which the LibTorch runtime
// dominates at this size.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "core/guard/planner.h"
#include "tests/worker/helpers/multirank.h"
#include "worker/comm/communicator_factory.h"
#include "worker/train/grpo_trainer.h"

namespace headroom::worker {
namespace {

using headroom::testing::Describe;
using headroom::testing::FreePort;
using headroom::testing::RankContext;
using headroom::testing::RunRanks;
using namespace std::chrono_literals;

spec::TrainingJobSpec Job(int stage) {
  spec::TrainingJob job;
  spec::ApplyDefaults(job);
  job.spec.model.preset = "tiny";
  job.spec.task = {"reverse", 2, 1};
  job.spec.grpo.prompts_per_step = 4;
  job.spec.grpo.group_size = 2;
  job.spec.grpo.max_prompt_length = 4;
  job.spec.grpo.max_response_length = 4;
  job.spec.grpo.kl_coef = 0.0;
  job.spec.sharding.stage = stage;
  return job.spec;
}

TEST(TrainerMemoryTest, ModelStatePerRankFollowsThePlan) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  std::printf("%-6s %-6s %-11s %12s %12s %12s\n", "world", "stage", "component", "measured", "planned", "step peak");
  std::map<std::pair<int, int>, long long> totals;  // (world, stage) -> measured bytes
  for (int world = 1; world <= 2; ++world) {
    for (int stage = 0; stage <= 3; ++stage) {
      const int port = FreePort();
      auto results = RunRanks(
          world,
          [&](const RankContext& ctx) {
        torch::set_num_threads(1);
        auto comm =
            world == 1 ? MakeLocalCommunicator() : MakeCommunicator("gloo", ctx.rank, world, "127.0.0.1", port, 30s);
        const spec::TrainingJobSpec spec = Job(stage);
        GrpoTrainer trainer(spec, *comm, torch::kCPU);
        ModelShards& shards = trainer.shards();
        shards.ResetPeak();
        trainer.RunStep(0);  // whatever a step allocates and keeps is counted

        const ShardedBytes measured = shards.ResidentBytes();
        const ShardedBytes peak = shards.PeakBytes();
        const guard::Plan plan = guard::PlanMemory(spec, world);
        const int64_t groups = shards.per_layer() ? 1 + trainer.model()->layers() : 1;
        std::ostringstream out;
        bool ok = plan.parameters == shards.numel();
        for (auto [name, bytes, top] :
             {std::tuple<std::string, int64_t, int64_t>{"parameters", measured.parameters, peak.parameters},
              {"gradients", measured.gradients, peak.gradients},
              {"optimizer", measured.optimizer, peak.optimizer}}) {
          const int64_t planned = plan.Find(name)->host_bytes;
          // Padding: < world fp32 elements per buffer and group, two buffers for the optimizer.
          ok = ok && bytes >= planned && bytes - planned < 2 * 4 * world * groups;
          out << world << " " << stage << " " << name << " " << bytes << " " << planned << " " << top << "\n";
        }
        if (stage == 3) {
          // In the step: the shards, the outer group in full and one block in full
          // (padded to the world size: < world elements more).
          const int64_t outer = shards.parts().front().group->layout().padded_numel() * 4;
          const int64_t layer = plan.Find("gathered layer")->host_bytes;
          const int64_t expected = measured.parameters + outer + layer;
          ok = ok && peak.parameters > measured.parameters + layer && peak.parameters <= expected + 4 * world;
          out << world << " " << stage << " gathered-peak " << peak.parameters << " " << expected << " "
              << peak.parameters << "\n";
        }
        if (ctx.rank == 0 || !ok) ctx.Report(out.str());
        if (!ok) throw std::runtime_error("rank " + std::to_string(ctx.rank) + ": measured bytes differ from the plan");
          },
          120s);
      for (const auto& r : results) ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(results);
      std::istringstream lines(results[0].message);
      int w, s;
      std::string name;
      long long measured, planned, top;
      while (lines >> w >> s >> name >> measured >> planned >> top) {
        std::printf("%-6d %-6d %-11s %12lld %12lld %12lld\n", w, s, name.c_str(), measured, planned, top);
        if (name != "gathered-peak") totals[{w, s}] += measured;
      }
    }
  }
  std::printf("(gathered-peak: stage 3's most parameter bytes at once in a step, against the shards + the\n"
              " planner's one gathered layer + the outer group in full)\n");
  std::printf("%-6s %-6s %-11s\n", "world", "stage", "total");
  for (const auto& [key, bytes] : totals) std::printf("%-6d %-6d %12lld\n", key.first, key.second, bytes);
  auto Total = [&](int world, int stage) { return totals[{world, stage}]; };
  // What the stages are for: each sharded stage holds less per rank on 2 ranks than on 1,
  // and on 2 ranks each stage holds less than the one before.
  for (int stage = 1; stage <= 3; ++stage) {
    EXPECT_LT(Total(2, stage), Total(1, stage)) << "stage " << stage;
    EXPECT_LT(Total(2, stage), Total(2, stage - 1)) << "stage " << stage;
  }
  // Stage 0 replicates everything: the same bytes up to the padding (4 buffers, < 2 each).
  EXPECT_NEAR(Total(2, 0), Total(1, 0), 4 * 4 * 2) << "stage 0 replicates everything";
}

}  // namespace
}  // namespace headroom::worker
