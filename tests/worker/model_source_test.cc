// The model source reads spec.model's files once: config.json and the tokens in its
// constructor, the weights in LoadPolicy; the reference model and every later consumer
// (the task, the guard's plan) work from memory, so removing the files after they were
// read changes nothing.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/guard/planner.h"
#include "core/hf/hf_config.h"
#include "tests/helpers/temp_dir.h"
#include "tests/worker/helpers/example_text_task.h"
#include "tests/worker/helpers/open_counter.h"
#include "worker/comm/communicator.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/model/model_source.h"
#include "worker/tasks/task_factory.h"
#include "worker/train/grpo_trainer.h"

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;

// The example text job on a copy of its model directory, with a reference model.
spec::TrainingJobSpec TextJobOn(const std::string& model_dir) {
  spec::TrainingJobSpec s;
  s.model.path = model_dir;
  s.task.seed = 7;
  headroom::testing::UseExampleTextTask(s);
  s.grpo.prompts_per_step = 2;
  s.grpo.group_size = 2;
  s.grpo.micro_batch_size = 4;
  s.grpo.max_prompt_length = 64;
  s.grpo.max_response_length = 4;
  s.grpo.kl_coef = 0.1;
  return s;
}

std::string CopyOfExampleModel(const headroom::testing::TempDir& dir) {
  const fs::path to = fs::path(dir.path()) / "model";
  fs::copy(headroom::testing::ExampleTextModel(), to);
  return to.string();
}

void ExpectSameParameters(const NamedTensors& a, const NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(torch::equal(a[i].second.cpu(), b[i].second.cpu())) << a[i].first;
  }
}

TEST(ModelSource, AfterLoadingNothingIsReadAgain) {
  headroom::testing::TempDir dir("model-source");
  const spec::TrainingJobSpec spec = TextJobOn(CopyOfExampleModel(dir));
  const guard::ModelShape planned = guard::JobModelShape(spec);  // read here, before the source
  const ModelSource source(spec);
  ASSERT_TRUE(source.pretrained());
  CausalLM policy = source.LoadPolicy();
  const auto from_file = LoadHfCausalLM(spec.model.path, source.max_seq_len())->OrderedParameters();
  ExpectSameParameters(policy->OrderedParameters(), from_file);

  fs::remove_all(spec.model.path);
  CausalLM reference = source.CopyOf(policy);
  ExpectSameParameters(reference->OrderedParameters(), from_file);
  EXPECT_NE(reference->OrderedParameters()[0].second.data_ptr(), policy->OrderedParameters()[0].second.data_ptr())
      << "a copy, not the policy's own tensors";
  EXPECT_EQ(source.plan_shape().parameters, planned.parameters);
  EXPECT_EQ(source.plan_shape().vocab, planned.vocab);
  EXPECT_EQ(source.plan_shape().source, planned.source);
  const std::unique_ptr<Task> task = MakeTask(spec, source);  // tokenizer and stop tokens from memory
  EXPECT_EQ(task->response_format().stop_tokens, source.tokens().stop_tokens);
  EXPECT_GT(task->Make(0).prompt_tokens.size(), 1u);
}

// Without an eos_token_id in generation_config.json the stop tokens fall back to
// config.json's, which the source has parsed already: the file is not opened again.
TEST(ModelSource, ConfigJsonIsOpenedOnceWhenGenerationConfigSetsNoStopToken) {
  headroom::testing::TempDir dir("model-source-eos");
  const spec::TrainingJobSpec spec = TextJobOn(CopyOfExampleModel(dir));
  std::ofstream(fs::path(spec.model.path) / "generation_config.json") << R"({"pad_token_id": 0})";
  {  // config.json's stop tokens: one the tokenizer does not name as its eos_token
    const fs::path file = fs::path(spec.model.path) / "config.json";
    nlohmann::json config = nlohmann::json::parse(std::ifstream(file));
    config["eos_token_id"] = {1, 2};
    std::ofstream(file) << config.dump();
  }
  headroom::testing::OpenCounter config_json((fs::path(spec.model.path) / "config.json").string());
  const ModelSource source(spec);
  CausalLM policy = source.LoadPolicy();
  const std::unique_ptr<Task> task = MakeTask(spec, source);
  EXPECT_EQ(config_json.Opens(), 1);
  const hf::HfModelConfig config = hf::LoadHfConfig(spec.model.path);
  EXPECT_EQ(config_json.Opens(), 2) << "the counter sees an open";
  ASSERT_EQ(config.eos_token_ids, (std::vector<int64_t>{1, 2}));
  const HfTokenizer& tokenizer = source.tokens().tokenizer;
  ASSERT_EQ(tokenizer.TokenId(*tokenizer.eos_token()).value_or(-1), 2);
  EXPECT_EQ(task->response_format().stop_tokens, (std::vector<int64_t>{2, 1}))
      << "the tokenizer's eos_token, then config.json's eos_token_id";
}

TEST(ModelSource, TheTrainersReferenceIsThePolicysInitialWeightsWithoutRereadingTheModel) {
  headroom::testing::TempDir dir("model-source-trainer");
  const spec::TrainingJobSpec spec = TextJobOn(CopyOfExampleModel(dir));
  const auto from_file = LoadHfCausalLM(spec.model.path, 68)->OrderedParameters();
  const ModelSource source(spec);
  // Only the weights are left: config.json, the tokenizer and generation_config.json were
  // read by the source, once.
  for (const char* name : {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    ASSERT_TRUE(fs::remove(fs::path(spec.model.path) / name)) << name;
  }
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(spec, source, *comm, torch::kCPU);
  ASSERT_TRUE(trainer.has_reference_model());
  ExpectSameParameters(trainer.reference_model()->OrderedParameters(), from_file);
  ExpectSameParameters(trainer.model()->OrderedParameters(), from_file);
}

TEST(ModelSource, APresetReadsNoFileAndPlansAsThePlannerDoes) {
  spec::TrainingJobSpec spec;
  spec.model.preset = "tiny";
  spec.grpo.max_prompt_length = 16;
  spec.grpo.max_response_length = 8;
  const ModelSource source(spec);
  EXPECT_FALSE(source.pretrained());
  EXPECT_EQ(source.max_seq_len(), 24);
  EXPECT_EQ(source.config().max_position_embeddings, 24);
  const guard::ModelShape preset = guard::PresetModelShape(spec);
  EXPECT_EQ(source.plan_shape().parameters, preset.parameters);
  EXPECT_EQ(source.plan_shape().source, preset.source);
  EXPECT_THROW(source.tokens(), std::logic_error) << "a generated task uses the character tokenizer";
  CausalLM policy = source.LoadPolicy();
  ExpectSameParameters(source.LoadPolicy()->OrderedParameters(), policy->OrderedParameters());
  ExpectSameParameters(source.CopyOf(policy)->OrderedParameters(), policy->OrderedParameters());
}

TEST(ModelSource, AHubReferenceIsItsCachedSnapshot) {
  headroom::testing::TempDir cache("model-source-hub");
  ::setenv("HF_HUB_CACHE", cache.path().c_str(), 1);
  spec::TrainingJobSpec spec;
  spec.model.hub.repo = "org/tiny";
  spec.model.hub.revision = "main";
  try {
    ModelSource missing(spec);
    ADD_FAILURE() << "nothing is cached yet";
  } catch (const hf::HfConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("org/tiny@main"), std::string::npos) << e.what();
  }
  const std::string commit(40, 'a');
  const fs::path repo = fs::path(cache.path()) / "models--org--tiny";
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots");
  fs::copy(headroom::testing::ExampleTextModel(), repo / "snapshots" / commit);
  std::ofstream(repo / "refs" / "main") << commit;
  const ModelSource source(spec);
  ::unsetenv("HF_HUB_CACHE");
  EXPECT_TRUE(source.pretrained());
  EXPECT_EQ(fs::path(source.dir()), repo / "snapshots" / commit);
  EXPECT_EQ(source.config().vocab_size, hf::LoadHfConfig(source.dir()).vocab_size);
}

TEST(ModelSource, ATextTaskWithoutAModelDirectoryIsRefusedNamingTheField) {
  spec::TrainingJobSpec spec = TextJobOn("");
  try {
    ModelSource source(spec);
    FAIL() << "a text task needs a tokenizer";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("spec.model.path"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headroom::worker
