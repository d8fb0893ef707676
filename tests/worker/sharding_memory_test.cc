// What a rank holds between steps, measured on the real tiny preset model, against what
// core/guard/planner.h plans for the same spec: per-rank parameter, gradient and
// optimizer bytes fall with the stage and the world size exactly as ZeRO says (up to the
// padding to a multiple of the world size, < world elements per buffer).
// "Measured" is the storage of the buffers the group and the optimizer hold (tensor
// bytes, not process RSS, which the LibTorch runtime would dominate at this size).
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <sstream>

#include "core/guard/planner.h"
#include "core/spec/training_job.h"
#include "tests/worker/helpers/multirank.h"
#include "worker/comm/communicator_factory.h"
#include "worker/model/model_source.h"
#include "worker/sharding/sharded_adamw.h"

namespace headroom::worker {
namespace {

using headroom::testing::Describe;
using headroom::testing::FreePort;
using headroom::testing::RankContext;
using headroom::testing::RunRanks;
using namespace std::chrono_literals;

spec::TrainingJob TinyJob(int stage) {
  spec::TrainingJob job;
  spec::ApplyDefaults(job);
  job.spec.sharding.stage = stage;
  return job;
}

TEST(ShardingMemoryTest, PerRankBytesFollowThePlan) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  std::printf("%-6s %-6s %-12s %12s %12s\n", "world", "stage", "component", "measured", "planned");
  for (int world = 1; world <= 3; ++world) {
    for (int stage = 0; stage <= 3; ++stage) {
      const int port = FreePort();
      auto results = RunRanks(
          world,
          [&](const RankContext& ctx) {
        torch::set_num_threads(1);
        auto comm =
            world == 1 ? MakeLocalCommunicator() : MakeCommunicator("gloo", ctx.rank, world, "127.0.0.1", port, 20s);
        const auto job = TinyJob(stage);
        CausalLM model = ModelSource(job.spec).LoadPolicy();
        ShardingOptions options;
        options.stage = stage;
        FlatParameterGroup group(model->OrderedParameters(), *comm, options);
        ShardedAdamW optimizer(group, {});
        // One full step, so whatever a step allocates and keeps is counted.
        group.Gather();
        group.ZeroGrad();
        auto tokens = torch::randint(0, 32, {2, 8}, torch::kLong);
        model->forward(tokens).pow(2).mean().backward();
        group.ReduceGradients();
        optimizer.Step(1.0);

        ShardedBytes measured = group.ResidentBytes();
        measured.optimizer = optimizer.resident_bytes();
        const auto plan = guard::PlanMemory(job.spec, world);
        if (plan.parameters != group.layout().numel()) {
          throw std::runtime_error("planner Psi " + std::to_string(plan.parameters) + " != model " +
                                   std::to_string(group.layout().numel()));
        }
        std::ostringstream out;
        bool ok = true;
        for (auto [name, bytes] : {std::pair<std::string, int64_t>{"parameters", measured.parameters},
                                   {"gradients", measured.gradients},
                                   {"optimizer", measured.optimizer}}) {
          const int64_t planned = plan.Find(name)->host_bytes;
          // Padding: < world fp32 elements per buffer, two buffers for the optimizer.
          ok = ok && bytes >= planned && bytes - planned < 2 * 4 * world;
          out << world << " " << stage << " " << name << " " << bytes << " " << planned << "\n";
        }
        if (ctx.rank == 0 || !ok) ctx.Report(out.str());
        if (!ok) throw std::runtime_error("rank " + std::to_string(ctx.rank) + " measured bytes differ from the plan");
          },
          60s);
      for (const auto& r : results) ASSERT_TRUE(r.exited && r.exit_code == 0) << Describe(results);
      std::istringstream lines(results[0].message);
      int w, s;
      std::string name;
      long long measured, planned;
      while (lines >> w >> s >> name >> measured >> planned) {
        std::printf("%-6d %-6d %-12s %12lld %12lld\n", w, s, name.c_str(), measured, planned);
      }
    }
  }
}

}  // namespace
}  // namespace headroom::worker
