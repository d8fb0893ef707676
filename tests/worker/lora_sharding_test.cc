// LoRA over ranks: at ZeRO stages 0, 1 and 2 on two Gloo ranks, a LoRA job (KL to the base
// on, two mini-batches per step) ends with the adapters of stage 0 on one rank, up to float
// rounding, and with the frozen base byte-identical to where it started on every stage.
// Each configuration runs as forked children (tests/worker/helpers/multirank.h); rank 0
// writes the adapters and the base as raw fp32 bytes for the parent to compare.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/worker/helpers/multirank.h"
#include "tests/worker/helpers/sharding_fixture.h"
#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/comm/communicator_factory.h"
#include "worker/train/grpo_trainer.h"
#include "worker/train/training_state.h"

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;
using headroom::testing::Describe;
using headroom::testing::Expect;
using headroom::testing::FreePort;
using headroom::testing::RankContext;
using headroom::testing::RunRanks;
using namespace std::chrono_literals;

// As trainer_sharding_test's: the per-rank sum order and OpenBLAS's shape-dependent
// kernels move the last bits, which AdamW carries to ~3e-5 over a few steps; 1e-4 is far
// below one AdamW step of the adapters (lr 1e-2).
constexpr double kAtol = 1e-4, kRtol = 1e-4;

spec::TrainingJobSpec Job(int stage) {
  spec::TrainingJobSpec spec;
  spec.model.preset = "tiny";
  spec.model.lora.r = 4;
  spec.model.lora.alpha = 8;
  spec.model.lora.target_modules = {"all-linear"};
  spec.task.name = "reverse";
  spec.task.digits = 2;
  spec.task.seed = 3;
  spec.grpo.prompts_per_step = 4;
  spec.grpo.group_size = 4;
  spec.grpo.max_prompt_length = 4;
  spec.grpo.max_response_length = 4;
  spec.grpo.micro_batch_size = 3;
  spec.grpo.updates_per_step = 2;
  spec.grpo.learning_rate = 1e-2;
  spec.grpo.kl_coef = 0.05;
  spec.sharding.stage = stage;
  return spec;
}

std::vector<float> ReadFloats(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

struct Result {
  std::vector<float> base_before, base_after, adapters;
};

// Steps [first, last): resumed from dir/checkpoints when first > 0, saved there when `save`.
Result Train(const fs::path& dir, int world, int stage, int first = 0, int last = 3, bool save = false) {
  const std::string name =
      std::to_string(world) + "-" + std::to_string(stage) + "-" + std::to_string(first) + "-" + std::to_string(last);
  const fs::path checkpoints = dir / "checkpoints";
  const fs::path before = dir / (name + ".base0"), after = dir / (name + ".base"), adapters = dir / (name + ".lora");
  const int port = FreePort();
  auto results = RunRanks(
      world,
      [&](const RankContext& ctx) {
    torch::set_num_threads(1);
    auto comm =
        world == 1 ? MakeLocalCommunicator() : MakeCommunicator("gloo", ctx.rank, world, "127.0.0.1", port, 30s);
    GrpoTrainer trainer(Job(stage), *comm, torch::kCPU);
    auto split = [&](bool adapter) {
      std::vector<torch::Tensor> parts;
      for (const auto& [n, p] : trainer.model()->OrderedParameters()) {
        if ((n.find(".lora_") != std::string::npos) == adapter) parts.push_back(p.detach().reshape({-1}).clone());
      }
      return torch::cat(parts);
    };
    if (ctx.rank == 0) headroom::testing::WriteBytes(before.string(), split(false));
    for (int step = 0; step < 3; ++step) {
      const StepResult r = trainer.RunStep(step);
      Expect(std::isfinite(r.loss) && r.grad_norm > 0,
             "step " + std::to_string(step) + ": grad norm " + std::to_string(r.grad_norm));
    }
    if (ctx.rank == 0) {
      headroom::testing::WriteBytes(after.string(), split(false));
      headroom::testing::WriteBytes(adapters.string(), split(true));
    }
      },
      120s);
  for (const auto& r : results) EXPECT_TRUE(r.exited && r.exit_code == 0) << name << "\n" << Describe(results);
  return {ReadFloats(before), ReadFloats(after), ReadFloats(adapters)};
}

TEST(LoraSharding, StagesZeroToTwoOnTwoRanksMatchOneRankAndLeaveTheBase) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  const fs::path dir = fs::temp_directory_path() / ("headroom-lora-sharding-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const Result reference = Train(dir, 1, 0);
  ASSERT_FALSE(reference.adapters.empty());
  for (int stage : {0, 1, 2}) {
    const Result r = Train(dir, 2, stage);
    ASSERT_EQ(r.adapters.size(), reference.adapters.size()) << "stage " << stage;
    ASSERT_EQ(r.base_after.size(), r.base_before.size());
    EXPECT_EQ(std::memcmp(r.base_after.data(), r.base_before.data(), r.base_before.size() * sizeof(float)), 0)
        << "stage " << stage << ": the base changed";
    EXPECT_EQ(r.base_before, reference.base_before) << "every run starts from the same base";
    double worst = 0;
    for (size_t i = 0; i < r.adapters.size(); ++i) {
      const double d = std::abs(static_cast<double>(r.adapters[i]) - reference.adapters[i]);
      worst = std::max(worst, d / (kAtol + kRtol * std::abs(static_cast<double>(reference.adapters[i]))));
    }
    EXPECT_LE(worst, 1.0) << "stage " << stage << " on 2 ranks vs stage 0 on 1 rank";
  }
  fs::remove_all(dir);
}

// A reshard: two ranks at stage 2 save after two steps (the checkpoint holds the adapters
// and their moments only), one rank at stage 0 resumes for the third, and ends where one
// rank that never stopped does.
TEST(LoraSharding, ACheckpointOfAdaptersReshardsFromTwoRanksToOne) {
#ifndef HEADROOM_HAVE_GLOO
  GTEST_SKIP() << "built without Gloo";
#endif
  const fs::path dir = fs::temp_directory_path() / ("headroom-lora-reshard-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const Result reference = Train(dir, 1, 0);
  Train(dir, 2, 2, 0, 2, /*save=*/true);
  const Result resumed = Train(dir, 1, 0, 2, 3);
  ASSERT_EQ(resumed.adapters.size(), reference.adapters.size());
  EXPECT_EQ(resumed.base_after, reference.base_before);
  double worst = 0;
  for (size_t i = 0; i < resumed.adapters.size(); ++i) {
    const double d = std::abs(static_cast<double>(resumed.adapters[i]) - reference.adapters[i]);
    worst = std::max(worst, d / (kAtol + kRtol * std::abs(static_cast<double>(reference.adapters[i]))));
  }
  EXPECT_LE(worst, 1.0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace headroom::worker
