// Every plan of a spec.model.path job is sized for the model in that directory, not for
// spec.model's preset: `headroom plan`, the worker's guard (MemoryGuard, built through
// MeasuredMemoryGuard as the worker and `headroom replay` build it) and the supervisors'
// crash escalation all take the shape from guard::JobModelShape, which reads the model's
// config.json (hf::LoadHfConfig, the same reader the worker loads the model with).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/guard/memory_guard.h"
#include "core/guard/planner.h"
#include "core/hf/hf_config.h"
#include "core/spec/training_job.h"

namespace headroom::guard {
namespace {
namespace fs = std::filesystem;

fs::path Fixture(const std::string& name) { return fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf" / name; }

spec::TrainingJobSpec Job(const std::string& model_path) {
  spec::TrainingJobSpec spec;
  spec.model.preset = "tiny";  // what a model.path job would wrongly be planned as
  spec.model.path = model_path;
  spec.resources.memory_bytes = 4LL << 30;
  spec.grpo.prompts_per_step = 8;
  spec.grpo.group_size = 4;
  spec.grpo.max_prompt_length = 16;
  spec.grpo.max_response_length = 512;
  spec.grpo.micro_batch_size = 8;
  spec.grpo.kl_coef = 0.01;
  spec.sharding.stage = 2;
  return spec;
}

void ExpectSamePlan(const Plan& a, const Plan& b) {
  EXPECT_EQ(a.parameters, b.parameters);
  ASSERT_EQ(a.components.size(), b.components.size());
  for (size_t i = 0; i < a.components.size(); ++i) {
    EXPECT_EQ(a.components[i].name, b.components[i].name);
    EXPECT_EQ(a.components[i].host_bytes, b.components[i].host_bytes) << a.components[i].name;
    EXPECT_EQ(a.components[i].gpu_bytes, b.components[i].gpu_bytes) << a.components[i].name;
  }
}

TEST(JobModelShape, IsTheConfigJsonsShapeForAModelPathJob) {
  for (const std::string fixture : {"qwen2", "qwen3", "llama3"}) {
    SCOPED_TRACE(fixture);
    const spec::TrainingJobSpec spec = Job(Fixture(fixture).string());
    const hf::HfModelConfig config = hf::LoadHfConfig(Fixture(fixture).string());
    const ModelShape shape = JobModelShape(spec);
    EXPECT_EQ(shape.parameters, config.ParameterCount());
    EXPECT_EQ(shape.layers, config.num_hidden_layers);
    EXPECT_EQ(shape.hidden, config.hidden_size);
    EXPECT_EQ(shape.kv_heads, config.num_key_value_heads);
    EXPECT_EQ(shape.head_dim, config.head_dim);
    EXPECT_EQ(shape.vocab, config.vocab_size);
    EXPECT_NE(shape.parameters, PresetModelShape(spec).parameters) << "the test could not tell the two apart";
  }
  spec::TrainingJobSpec preset = Job("");
  EXPECT_EQ(JobModelShape(preset).parameters, PresetModelShape(preset).parameters);
  EXPECT_EQ(JobModelShape(preset).source, "preset tiny");
}

TEST(JobModelShape, TheWorkersGuardPlansTheModelPathsModel) {
  const spec::TrainingJobSpec spec = Job(Fixture("qwen2").string());
  PlanOptions hf_options;
  hf_options.model = JobModelShape(spec);
  hf_options.gpu_total_bytes = 80LL << 30;
  const Plan expected = PlanMemory(spec, 2, hf_options);
  const Plan preset = PlanMemory(spec, 2, PlanOptions{80LL << 30, false, std::nullopt});
  ASSERT_NE(expected.parameters, preset.parameters);
  ASSERT_NE(expected.Find("generation cache")->host_bytes + expected.Find("generation cache")->gpu_bytes,
            preset.Find("generation cache")->host_bytes + preset.Find("generation cache")->gpu_bytes)
      << "grouped-query heads: the cache differs too";

  // As the worker builds its guard after the first step (and `headroom replay` from a trace).
  const MemoryGuard measured =
      MeasuredMemoryGuard(spec, 2, GuardHistory{}, spec.resources.memory_bytes, 80LL << 30, /*gpu_measured=*/true);
  spec::TrainingJobSpec on_gpu = spec;
  on_gpu.resources.gpus = 1;
  ExpectSamePlan(measured.plan(), PlanMemory(on_gpu, 2, hf_options));
  // Built directly, without a shape: it reads the same one.
  ExpectSamePlan(MemoryGuard(spec, 2, GuardHistory{}, PlanOptions{80LL << 30, false, std::nullopt}).plan(), expected);
}

TEST(JobModelShape, AnUnreadableConfigIsNamed) {
  const fs::path dir = fs::temp_directory_path() / ("headroom-shape-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": "wide"})";
  const spec::TrainingJobSpec spec = Job(dir.string());
  try {
    JobModelShape(spec);
    ADD_FAILURE() << "a bad config.json was planned";
  } catch (const hf::HfConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MemoryGuard(spec, 1), hf::HfConfigError);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace headroom::guard
