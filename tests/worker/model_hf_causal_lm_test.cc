// Hugging Face models (Qwen2, Qwen3, Llama 3) in LibTorch against a reference computed
// outside this code: tests/worker/fixtures/hf/make_fixtures.py writes tiny random models
// and the logits and greedy ids they must give (the architectures' equations in float64
// with python3-torch; its --reference transformers mode uses transformers itself).
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/hf/safetensors.h"
#include "tests/worker/helpers/fp32_tolerance.h"
#include "worker/comm/communicator.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/train/grpo_trainer.h"

namespace headroom::worker {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path Fixture(const std::string& name) { return fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf" / name; }

json Expected(const std::string& name) {
  std::ifstream in(Fixture(name) / "expected.json");
  return json::parse(in);
}

torch::Tensor Ids(const json& e) {
  return torch::tensor(e["ids"].get<std::vector<int64_t>>(), torch::kInt64).unsqueeze(0);
}

class Scratch {
 public:
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "headroom-hf-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~Scratch() { fs::remove_all(path_); }
  fs::path path() const { return path_; }

 private:
  fs::path path_;
};

class HfModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfModelTest, LogitsMatchTheReference) {
  const json e = Expected(GetParam());
  HfCausalLM model = LoadHfCausalLM(Fixture(GetParam()).string(), 64);
  torch::NoGradGuard no_grad;
  const auto logits = model->forward(Ids(e)).squeeze(0);
  std::vector<torch::Tensor> rows;
  for (const auto& row : e["logits"]) rows.push_back(torch::tensor(row.get<std::vector<double>>(), torch::kFloat64));
  const auto reference = torch::stack(rows);
  ASSERT_EQ(logits.sizes(), reference.sizes());
  // fp32 against the equations in float64: one side's rounding (helpers/fp32_tolerance.h).
  EXPECT_TRUE(testing::WithinForwardRounding(model, logits.size(0), logits.to(torch::kFloat64), reference))
      << GetParam();
}

TEST_P(HfModelTest, GreedyDecodingWithTheCacheMatchesTheReference) {
  const json e = Expected(GetParam());
  HfCausalLM model = LoadHfCausalLM(Fixture(GetParam()).string(), 64);
  torch::NoGradGuard no_grad;
  KvCache cache(model->kv_cache_shape(), 1, 32, torch::kCPU);
  cache.Reset(1);
  std::vector<int64_t> out = e["ids"].get<std::vector<int64_t>>();
  torch::Tensor input = Ids(e);
  const auto uncached_last = model->forward(input).select(1, input.size(1) - 1);
  for (int i = 0; i < e["max_new_tokens"].get<int>(); ++i) {
    const auto logits = model->ForwardCached(input, cache);
    if (i == 0) {
      EXPECT_TRUE(testing::WithinForwardRounding(model, input.size(1), logits, uncached_last))
          << "cached prefill = full forward";
    }
    out.push_back(logits.argmax(-1).item<int64_t>());
    input = torch::tensor({out.back()}, torch::kInt64).unsqueeze(0);
  }
  EXPECT_EQ(out, e["greedy"].get<std::vector<int64_t>>());
}

// In float64 the CPU's fused kernels (fp32 only) step aside: the forward takes the tensor-op
// path that every other dtype and device runs (rotary by roll over the packed heads,
// unfused RMSNorm and SwiGLU, matmul attention), here against the same reference, with and
// without the cache (tables at later positions).
TEST_P(HfModelTest, TheTensorOpPathMatchesTheReference) {
  const json e = Expected(GetParam());
  HfCausalLM model = LoadHfCausalLM(Fixture(GetParam()).string(), 64);
  model->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  const auto logits = model->forward(Ids(e)).squeeze(0);
  ASSERT_EQ(logits.scalar_type(), torch::kFloat64);
  std::vector<torch::Tensor> rows;
  for (const auto& row : e["logits"]) rows.push_back(torch::tensor(row.get<std::vector<double>>(), torch::kFloat64));
  // The softmax still runs in fp32: the fp32 bound holds.
  EXPECT_TRUE(testing::WithinForwardRounding(model, logits.size(0), logits, torch::stack(rows))) << GetParam();

  KvCache cache(model->kv_cache_shape(), 1, 32, torch::kCPU, torch::kFloat64);
  cache.Reset(1);
  std::vector<int64_t> out = e["ids"].get<std::vector<int64_t>>();
  torch::Tensor input = Ids(e);
  for (int i = 0; i < e["max_new_tokens"].get<int>(); ++i) {
    out.push_back(model->ForwardCached(input, cache).argmax(-1).item<int64_t>());
    input = torch::tensor({out.back()}, torch::kInt64).unsqueeze(0);
  }
  EXPECT_EQ(out, e["greedy"].get<std::vector<int64_t>>());
}

TEST_P(HfModelTest, ParameterNamesAreTheHuggingFaceNames) {
  HfCausalLM model = LoadHfCausalLM(Fixture(GetParam()).string(), 64);
  const hf::SafetensorsModel file(Fixture(GetParam()).string());
  std::set<std::string> ours, theirs;
  for (const auto& [name, p] : model->OrderedParameters()) ours.insert(name);
  for (const auto& [name, view] : file.tensors()) theirs.insert(name);
  EXPECT_EQ(ours, theirs);
  EXPECT_EQ(model->LayerOfParameter("model.layers.1.mlp.up_proj.weight"), 1);
  EXPECT_EQ(model->LayerOfParameter("model.embed_tokens.weight"), -1);
}

TEST_P(HfModelTest, SavedSafetensorsLoadBackWithIdenticalLogits) {
  Scratch dir;
  HfCausalLM model = LoadHfCausalLM(Fixture(GetParam()).string(), 64);
  fs::copy_file(Fixture(GetParam()) / "config.json", dir.path() / "config.json");
  SaveHfSafetensors(*model, (dir.path() / "model.safetensors").string(), "F32");
  HfCausalLM again = LoadHfCausalLM(dir.path().string(), 64);
  torch::NoGradGuard no_grad;
  const auto ids = Ids(Expected(GetParam()));
  EXPECT_TRUE(torch::equal(model->forward(ids), again->forward(ids)));
}

INSTANTIATE_TEST_SUITE_P(Architectures, HfModelTest, ::testing::Values("qwen2", "qwen3", "llama3", "llama3_v5"));

// A copy of a fixture whose config.json or tensors a test then breaks.
fs::path BrokenCopy(const Scratch& dir, const std::string& name) {
  fs::copy(Fixture(name), dir.path() / name);
  return dir.path() / name;
}

TEST(HfModelRefusals, UnsupportedArchitectureNamesTheField) {
  Scratch dir;
  const fs::path model = BrokenCopy(dir, "qwen2");
  json config = json::parse(std::ifstream(model / "config.json"));
  config["architectures"] = {"MixtralForCausalLM"};
  std::ofstream(model / "config.json") << config.dump();
  try {
    LoadHfCausalLM(model.string(), 64);
    FAIL() << "loaded an unsupported architecture";
  } catch (const hf::HfConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("config.json: architectures: \"MixtralForCausalLM\" is not supported"),
              std::string::npos)
        << e.what();
  }
}

TEST(HfModelRefusals, MissingOrMisshapenTensorIsNamed) {
  Scratch dir;
  const fs::path model = BrokenCopy(dir, "qwen3");
  json config = json::parse(std::ifstream(model / "config.json"));
  const int64_t stored_width = config["intermediate_size"].get<int64_t>();
  config["intermediate_size"] = stored_width + 8;
  std::ofstream(model / "config.json") << config.dump();
  try {
    LoadHfCausalLM(model.string(), 64);
    FAIL() << "loaded tensors of the wrong shape";
  } catch (const hf::SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor model.layers.0.mlp.gate_proj.weight has shape ["), std::string::npos)
        << e.what();
  }
  config["intermediate_size"] = stored_width;
  config["architectures"] = {"Qwen2ForCausalLM"};  // Qwen2 needs q/k/v biases the file lacks
  std::ofstream(model / "config.json") << config.dump();
  EXPECT_THROW(
      {
        try {
          LoadHfCausalLM(model.string(), 64);
        } catch (const hf::SafetensorsError& e) {
          EXPECT_NE(std::string(e.what()).find("missing tensor model.layers.0.self_attn.q_proj.bias"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      hf::SafetensorsError);
}

TEST(HfModelRefusals, UnsupportedStoredDtypeIsNamed) {
  Scratch dir;
  HfCausalLM model = LoadHfCausalLM(Fixture("qwen2").string(), 64);
  fs::create_directories(dir.path() / "m");
  fs::copy_file(Fixture("qwen2") / "config.json", dir.path() / "m/config.json");
  std::vector<torch::Tensor> keep;
  std::vector<hf::TensorToWrite> tensors;
  for (const auto& [name, p] : model->OrderedParameters()) {
    keep.push_back(name == "model.norm.weight" ? p.detach().to(torch::kFloat64).contiguous() : p.detach().contiguous());
    const auto& t = keep.back();
    tensors.push_back({name, name == "model.norm.weight" ? "F64" : "F32", t.sizes().vec(), t.data_ptr(),
                       static_cast<size_t>(t.numel() * t.element_size())});
  }
  hf::WriteSafetensors((dir.path() / "m/model.safetensors").string(), tensors);
  try {
    LoadHfCausalLM((dir.path() / "m").string(), 64);
    FAIL() << "loaded an F64 tensor";
  } catch (const hf::SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor model.norm.weight: dtype F64 is not supported"), std::string::npos)
        << e.what();
  }
}

// The trainer takes a Hugging Face model like the presets' transformer: GRPO steps on a
// toy task (its ids are inside the model's vocabulary) under ZeRO stage 3, where every
// block is gathered by its Hugging Face layer prefix.
TEST(HfModelTraining, GrpoStepsUpdateAPretrainedModelUnderZero3) {
  spec::TrainingJobSpec spec;
  spec.model.path = Fixture("qwen2").string();
  spec.task = {"reverse", 2, 4};
  spec.grpo.prompts_per_step = 2;
  spec.grpo.group_size = 4;
  spec.grpo.max_prompt_length = 4;
  spec.grpo.max_response_length = 3;
  spec.grpo.micro_batch_size = 4;
  spec.grpo.learning_rate = 1e-2;
  spec.grpo.kl_coef = 0.01;
  spec.sharding.stage = 3;
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(spec, *comm, torch::kCPU);
  trainer.shards().GatherAll();
  std::vector<torch::Tensor> before;
  for (const auto& [name, p] : trainer.model()->OrderedParameters()) before.push_back(p.detach().clone());
  trainer.shards().Release();
  bool any_update = false;
  for (int step = 0; step < 4; ++step) {
    const StepResult r = trainer.RunStep(step);
    EXPECT_TRUE(std::isfinite(r.loss)) << step;
    any_update = any_update || r.update_sequences > 0;
  }
  ASSERT_TRUE(any_update) << "every group had equal rewards in every step: nothing was trained";
  trainer.shards().GatherAll();
  size_t changed = 0, i = 0;
  for (const auto& [name, p] : trainer.model()->OrderedParameters()) {
    EXPECT_TRUE(torch::isfinite(p).all().item<bool>()) << name;
    changed += !torch::equal(p.detach(), before[i++]);
  }
  trainer.shards().Release();
  EXPECT_GT(changed, before.size() / 2) << "most parameters moved";
}

}  // namespace
}  // namespace headroom::worker
