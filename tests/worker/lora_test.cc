// LoRA (worker/model/lora.h): PEFT's init and names, the layer's forward and gradients
// against autograd on the merged weights W + scale B A, a frozen base (no gradient, not
// sharded, byte-identical after GRPO steps at stages 0-2 while the adapters move), and the
// KL term's reference as the base with the adapters off, equal to a separately loaded
// base model.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <string>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/hf/hf_export.h"
#include "core/hf/safetensors.h"
#include "tests/helpers/temp_dir.h"
#include "tests/worker/helpers/example_text_task.h"
#include "tests/worker/helpers/fp32_tolerance.h"
#include "tests/worker/helpers/preset_model.h"
#include "worker/cli/model_commands.h"
#include "worker/comm/communicator.h"
#include "worker/grpo/log_probs.h"
#include "worker/model/lora.h"
#include "worker/model/model_source.h"
#include "worker/sharding/model_shards.h"
#include "worker/train/checkpointer.h"
#include "worker/train/grpo_trainer.h"

namespace headroom::worker {
namespace {

testing::ModelDims Dims() {
  testing::ModelDims d;
  d.layers = 2;
  d.hidden = 32;
  d.heads = 4;
  d.ffn_hidden = 48;
  d.max_seq_len = 10;
  d.seed = 3;
  return d;
}

LoraOptions AllLinear(int64_t r, double alpha = 8) {
  LoraOptions o;
  o.r = r;
  o.alpha = alpha;
  o.targets = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  o.seed = 7;
  return o;
}

torch::Tensor Tokens(int64_t batch = 3, int64_t t = 8) {
  torch::manual_seed(21);
  return torch::randint(0, 32, {batch, t}, torch::kInt64);
}

// Every adapter's B drawn at random (a fresh B is zero, which would hide a wrong A or scale).
void RandomizeB(HfCausalLMImpl& model) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  for (auto& item : model.named_parameters()) {
    if (item.key().find(".lora_B.") != std::string::npos) item.value().normal_(0.0, 0.5);
  }
}

std::string WeightName(int64_t layer, const std::string& module) {
  const bool attention = module == "q_proj" || module == "k_proj" || module == "v_proj" || module == "o_proj";
  return "model.layers." + std::to_string(layer) + (attention ? ".self_attn." : ".mlp.") + module + ".weight";
}

std::map<std::string, torch::Tensor> Named(CausalLMImpl& model) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, p] : model.OrderedParameters()) out[name] = p;
  return out;
}

TEST(Lora, InitialisedAsPeftWithPeftNames) {
  HfCausalLM model = testing::PresetModel(Dims());
  ApplyLora(*model, AllLinear(4));
  const auto p = Named(*model);
  // [r, in] and [out, r], PEFT's names less its base_model.model. prefix.
  ASSERT_EQ(p.count("model.layers.1.self_attn.q_proj.lora_A.weight"), 1u);
  EXPECT_EQ(p.at("model.layers.1.self_attn.q_proj.lora_A.weight").sizes(), (std::vector<int64_t>{4, 32}));
  EXPECT_EQ(p.at("model.layers.1.self_attn.q_proj.lora_B.weight").sizes(), (std::vector<int64_t>{32, 4}));
  EXPECT_EQ(p.at("model.layers.0.mlp.down_proj.lora_A.weight").sizes(), (std::vector<int64_t>{4, 48}));
  EXPECT_EQ(p.at("model.layers.0.mlp.down_proj.lora_B.weight").sizes(), (std::vector<int64_t>{32, 4}));
  int64_t adapters = 0;
  for (const auto& [name, t] : p) {
    const bool a = name.find(".lora_A.") != std::string::npos, b = name.find(".lora_B.") != std::string::npos;
    EXPECT_EQ(t.requires_grad(), a || b) << name;
    if (b) {
      EXPECT_EQ(t.abs().max().item<float>(), 0.0f) << name;
    }
    if (a) {
      // kaiming_uniform_(a = sqrt(5)): U(-1/sqrt(in), 1/sqrt(in)), and not all zero.
      const double bound = 1.0 / std::sqrt(static_cast<double>(t.size(1)));
      EXPECT_LE(t.abs().max().item<double>(), bound) << name;
      EXPECT_GT(t.abs().max().item<double>(), bound / 2) << name;
    }
    adapters += (a || b) ? t.numel() : 0;
  }
  // 2 layers x r x (in + out): q, k, v, o (32 + 32), gate, up (32 + 48), down (48 + 32).
  EXPECT_EQ(adapters, 2 * 4 * (4 * 64 + 3 * 80));
}

TEST(Lora, FreshAdaptersChangeNothingAndOffIsTheBase) {
  HfCausalLM base = testing::PresetModel(Dims());
  HfCausalLM model = testing::PresetModel(Dims());
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = Tokens();
  const torch::Tensor expected = base->forward(tokens);
  ApplyLora(*model, AllLinear(4));
  EXPECT_TRUE(torch::equal(model->forward(tokens), expected)) << "B = 0 adds exactly 0";
  RandomizeB(*model);
  EXPECT_FALSE(torch::allclose(model->forward(tokens), expected));
  {
    AdaptersOff off(*model);
    EXPECT_TRUE(torch::equal(model->forward(tokens), expected)) << "adapters off: the base, bit for bit";
  }
  EXPECT_FALSE(torch::allclose(model->forward(tokens), expected)) << "the scope turns them back on";
}

// The adapted model against the same base with W + scale B A folded into its weights:
// the logits within fp32 rounding, and the adapters' gradients equal to what autograd
// gives the merged weight W' (dA = scale B^T dW', dB = scale dW' A^T), for both a plain
// and an rsLora scale.
TEST(Lora, ForwardAndGradientsMatchAutogradOnMergedWeights) {
  for (const bool rs : {false, true}) {
    LoraOptions options = AllLinear(4, /*alpha=*/12);
    options.rs_lora = rs;
    HfCausalLM model = testing::PresetModel(Dims());
    ApplyLora(*model, options);
    RandomizeB(*model);
    HfCausalLM merged = testing::PresetModel(Dims());
    {
      torch::NoGradGuard no_grad;
      for (int64_t l = 0; l < model->layers(); ++l) {
        for (const char* m : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}) {
          LoraAdapter* a = AdapterOf(*model, l, m);
          ASSERT_NE(a, nullptr);
          EXPECT_DOUBLE_EQ(a->scale(), rs ? 12.0 / 2.0 : 12.0 / 4.0);
          const std::string key = WeightName(l, m);
          Named(*merged).at(key).copy_(a->MergedWeight(Named(*model).at(key)));
        }
      }
    }
    const torch::Tensor tokens = Tokens();
    torch::manual_seed(9);
    const torch::Tensor probe = torch::randn({3, 8, 32});  // a fixed direction for the loss
    const torch::Tensor got = model->forward(tokens);
    const torch::Tensor want = merged->forward(tokens);
    EXPECT_TRUE(testing::WithinForwardRounding(merged, 8, got, want)) << "rsLora " << rs;
    (got * probe).sum().backward();
    (want * probe).sum().backward();
    const auto mp = Named(*model), wp = Named(*merged);
    for (const auto& [name, p] : mp) {
      if (name.find(".lora_") == std::string::npos) {
        EXPECT_FALSE(p.grad().defined()) << name << ": the base is frozen";
      }
    }
    for (int64_t l = 0; l < model->layers(); ++l) {
      for (const char* m : {"q_proj", "down_proj"}) {
        LoraAdapter* a = AdapterOf(*model, l, m);
        const std::string key = WeightName(l, m);
        const torch::Tensor dw = wp.at(key).grad();
        const torch::Tensor da = a->scale() * torch::matmul(a->b()->weight.detach().t(), dw);
        const torch::Tensor db = a->scale() * torch::matmul(dw, a->a()->weight.detach().t());
        // Each side is the forward's chained sums (to the projection's input), the backward's
        // (to its output's gradient), the sum over the batch's 24 positions that makes dW',
        // and one more product over the rank or the projection's width: each a sum of at
        // most max(widest weight, positions) products.
        const testing::ForwardSums s = testing::SumsOfForward(merged, 8);
        const int64_t terms = std::max<int64_t>(s.terms, 3 * 8), depth = 2 * s.depth + 2;
        const double tol_a = testing::SummationTolerance(da.abs().max().item<double>(), terms, depth);
        const double tol_b = testing::SummationTolerance(db.abs().max().item<double>(), terms, depth);
        EXPECT_TRUE(testing::WithinTolerance(a->a()->weight.grad(), da, tol_a)) << l << " " << m << " A";
        EXPECT_TRUE(testing::WithinTolerance(a->b()->weight.grad(), db, tol_b)) << l << " " << m << " B";
      }
    }
  }
}

TEST(Lora, OnlyAdaptersAreSharded) {
  auto comm = MakeLocalCommunicator();
  HfCausalLM model = testing::PresetModel(Dims());
  ApplyLora(*model, AllLinear(2));
  int64_t base = 0;
  for (const auto& [name, p] : model->OrderedParameters())
    base += name.find(".lora_") == std::string::npos ? p.numel() : 0;
  for (int stage : {0, 1, 2, 3}) {
    ShardingOptions o;
    o.stage = stage;
    ModelShards shards(model, *comm, o, AdamWConfig{});
    EXPECT_EQ(shards.numel(), 2 * 2 * (4 * 64 + 3 * 80)) << "stage " << stage;
    // Stages 0-2 leave the base in the model; stage 3 holds it in frozen groups (one rank:
    // all of it), beside the adapters' own groups.
    EXPECT_EQ(shards.ResidentBytes().frozen, stage == 3 ? 4 * base : 0) << "stage " << stage;
    EXPECT_EQ(shards.ResidentBytes().parameters, 4 * shards.numel()) << "stage " << stage;
    if (stage == 3) shards.GatherAll();  // the next stage's shards start from the whole model
  }
}

// ZeRO stage 3 recomputes each block in backward (recomputed_block.h): with dropout on, the
// recompute must draw the forward's masks, or the gradient is that of another function. The
// sharded model's loss and adapter gradients equal a plain model's from the same generator
// state, within the rounding of the forward's and backward's chained sums; the plain model
// from another state (other masks) is far outside it.
TEST(Lora, DropoutAtStageThreeReplaysItsMaskInTheRecompute) {
  auto comm = MakeLocalCommunicator();
  LoraOptions options = AllLinear(4);
  options.dropout = 0.5;
  HfCausalLM plain = testing::PresetModel(Dims()), sharded = testing::PresetModel(Dims());
  for (HfCausalLM* m : {&plain, &sharded}) {
    ApplyLora(**m, options);
    RandomizeB(**m);
    (*m)->train();
  }
  const torch::Tensor tokens = Tokens();
  auto loss_of = [&](HfCausalLM& model, uint64_t seed) {
    torch::manual_seed(seed);
    return model->forward(tokens).square().mean();
  };
  ShardingOptions o;
  o.stage = 3;
  ModelShards shards(sharded, *comm, o, AdamWConfig{});
  shards.Gather();
  shards.ZeroGrad();
  const torch::Tensor sharded_loss = loss_of(sharded, 42);
  sharded_loss.backward();
  shards.ReduceGradients();
  const torch::Tensor plain_loss = loss_of(plain, 42);
  plain_loss.backward();
  std::map<std::string, torch::Tensor> same_masks, other_masks;
  for (const auto& [name, p] : plain->OrderedParameters()) {
    if (name.find(".lora_") != std::string::npos) same_masks[name] = p.grad().clone();
  }
  plain->zero_grad();
  loss_of(plain, 43).backward();
  for (const auto& [name, p] : plain->OrderedParameters()) {
    if (name.find(".lora_") != std::string::npos) other_masks[name] = p.grad().clone();
  }
  const testing::ForwardSums s = testing::SumsOfForward(plain, 8);
  const int64_t terms = std::max<int64_t>(s.terms, 3 * 8), depth = 2 * s.depth + 2;
  EXPECT_TRUE(testing::WithinTolerance(sharded_loss, plain_loss,
                                       testing::SummationTolerance(plain_loss.item<double>(), terms, depth)));
  size_t compared = 0;
  double farthest_other = 0;
  for (const ShardedStatePart& part : shards.parts()) {
    const torch::Tensor grad = part.group->Gradient(part.group->owned());  // one rank owns it all
    for (const FlatSlot& slot : part.group->layout().slots()) {
      const torch::Tensor got = grad.narrow(0, slot.offset, slot.numel).view(slot.shape);
      const torch::Tensor& want = same_masks.at(slot.name);
      const double tolerance = testing::SummationTolerance(want.abs().max().item<double>(), terms, depth);
      EXPECT_TRUE(testing::WithinTolerance(got, want, tolerance)) << slot.name;
      if (slot.name.find(".lora_B.") != std::string::npos) {
        farthest_other = std::max(
            farthest_other, (other_masks.at(slot.name) - want).abs().max().item<double>() / std::max(tolerance, 1e-30));
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, same_masks.size()) << "every adapter has its gradient at stage 3";
  EXPECT_GT(farthest_other, 100.0) << "other masks give other gradients: the comparison can tell";
}

spec::TrainingJobSpec LoraJob(int stage, double kl_coef) {
  spec::TrainingJobSpec spec;
  spec.model.preset = "tiny";
  spec.model.lora.r = 4;
  spec.model.lora.alpha = 8;
  spec.model.lora.target_modules = {"all-linear"};
  spec.task.name = "addition";
  spec.task.digits = 1;
  spec.task.seed = 4;
  spec.grpo.prompts_per_step = 4;
  spec.grpo.group_size = 4;
  spec.grpo.max_prompt_length = 5;
  spec.grpo.max_response_length = 4;
  spec.grpo.micro_batch_size = 6;
  spec.grpo.updates_per_step = 2;
  spec.grpo.learning_rate = 1e-2;
  spec.grpo.kl_coef = kl_coef;
  spec.sharding.stage = stage;
  return spec;
}

TEST(Lora, AfterGrpoStepsTheBaseIsByteIdenticalAndOnlyAdaptersMoved) {
  auto comm = MakeLocalCommunicator();
  for (int stage : {0, 1, 2, 3}) {
    const spec::TrainingJobSpec spec = LoraJob(stage, 0.05);
    GrpoTrainer trainer(spec, *comm, torch::kCPU);
    std::map<std::string, torch::Tensor> before;
    trainer.shards().GatherAll();  // stage 3: the base and the adapters are sharded
    for (const auto& [name, p] : trainer.model()->OrderedParameters()) before[name] = p.detach().clone();
    trainer.shards().Release();
    double moved = 0;
    for (int step = 0; step < 2; ++step) moved += trainer.RunStep(step).grad_norm;
    EXPECT_GT(moved, 0) << "stage " << stage;
    trainer.shards().GatherAll();
    int64_t adapters_moved = 0;
    for (const auto& [name, p] : trainer.model()->OrderedParameters()) {
      const torch::Tensor& was = before.at(name);
      if (name.find(".lora_") == std::string::npos) {
        ASSERT_EQ(p.scalar_type(), was.scalar_type()) << name;
        EXPECT_EQ(std::memcmp(p.contiguous().data_ptr(), was.data_ptr(), was.numel() * was.element_size()), 0)
            << "stage " << stage << ": base tensor " << name << " changed";
        EXPECT_FALSE(p.grad().defined()) << name;
      } else if (name.find(".lora_B.") != std::string::npos) {
        adapters_moved += !torch::equal(p, was);
      }
    }
    EXPECT_EQ(adapters_moved, 2 * 7) << "stage " << stage << ": every B moves";
  }
}

TEST(Lora, TheReferenceIsTheBaseAsASeparatelyLoadedModelComputesIt) {
  auto comm = MakeLocalCommunicator();
  spec::TrainingJobSpec spec = LoraJob(0, 0.05);
  spec.model.preset = "";
  spec.model.path = testing::ExampleTextModel();
  testing::UseExampleTextTask(spec);
  spec.task.prompt.system = "";
  spec.grpo.max_prompt_length = 64;
  spec.grpo.max_response_length = 6;
  spec.grpo.prompts_per_step = 2;
  spec.grpo.group_size = 2;
  spec.grpo.learning_rate = 5e-2;
  GrpoTrainer trainer(spec, *comm, torch::kCPU);
  EXPECT_FALSE(trainer.has_reference_model()) << "no second model is loaded";
  trainer.RunStep(0);
  const auto second = trainer.RunStep(1);
  EXPECT_GT(second.kl, 0.0) << "the adapters moved the policy from the base";

  const ModelSource source(spec);
  CausalLM loaded = source.LoadPolicy();  // read from the safetensors again
  torch::manual_seed(3);
  const int64_t prompt = 6;
  const torch::Tensor sequences = torch::randint(0, source.config().vocab_size, {4, prompt + 5}, torch::kInt64);
  const torch::Tensor expected = ResponseLogProbsNoGrad(loaded, sequences, prompt, 1.0, 4);
  torch::Tensor reference, policy;
  {
    AdaptersOff base(*trainer.model());
    reference = ResponseLogProbsNoGrad(trainer.model(), sequences, prompt, 1.0, 4);
  }
  policy = ResponseLogProbsNoGrad(trainer.model(), sequences, prompt, 1.0, 4);
  EXPECT_TRUE(torch::equal(reference, expected)) << "the base with the adapters off is the loaded base, bit for bit";
  EXPECT_FALSE(torch::allclose(policy, expected));
}

spec::TrainingJobSpec TextLoraJob(const std::string& model_dir) {
  spec::TrainingJobSpec spec = LoraJob(1, 0.05);
  spec.model.preset = "";
  spec.model.path = model_dir;
  testing::UseExampleTextTask(spec);
  spec.grpo.max_prompt_length = 64;
  spec.grpo.max_response_length = 6;
  spec.grpo.prompts_per_step = 2;
  spec.grpo.group_size = 2;
  spec.grpo.learning_rate = 5e-2;
  spec.checkpoint.keep = 2;
  return spec;
}

// A LoRA job's checkpoint holds the adapters (and their optimizer state) alone, exports in
// PEFT's names and shapes, merges into a full model whose logits are the adapted model's
// within fp32 rounding, loads back as a job's starting adapter (spec.model.lora.from), and
// refuses to resume on a base whose weights changed, naming the file.
TEST(Lora, CheckpointExportMergeAndBaseIdentity) {
  namespace fs = std::filesystem;
  headroom::testing::TempDir dir("headroom-lora");
  const fs::path base = fs::path(dir.path()) / "base";
  fs::create_directories(base);
  for (const auto& entry : fs::directory_iterator(testing::ExampleTextModel())) {
    fs::copy_file(entry.path(), base / entry.path().filename());
  }
  const std::string checkpoints = (fs::path(dir.path()) / "checkpoints").string();
  const spec::TrainingJobSpec spec = TextLoraJob(base.string());
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(spec, *comm, torch::kCPU);
  {
    Checkpointer checkpointer(checkpoints, spec, *comm, 0, trainer);
    ASSERT_EQ(checkpointer.Resume(), 0);
    trainer.RunStep(0);
    trainer.RunStep(1);
    ASSERT_TRUE(checkpointer.Save(2).has_value());
  }
  // The checkpoint's tensors: adapters and their AdamW moments, nothing of the base.
  const fs::path step = fs::path(checkpoints) / "step-000002";
  const nlohmann::json manifest = nlohmann::json::parse(std::ifstream(step / "manifest.json"));
  int64_t adapter_tensors = 0;
  for (const auto& [name, entry] : manifest["tensors"].items()) {
    if (name == "optim.step") continue;  // the optimizer's step count
    EXPECT_NE(name.find(".lora_"), std::string::npos) << name << " is not an adapter's";
    adapter_tensors += name.rfind("model.", 0) == 0;
  }
  EXPECT_EQ(adapter_tensors, 2 * 7 * 2) << "A and B of 7 projections in 2 layers";
  EXPECT_TRUE(manifest["extra"]["lora"]["base"]["files"].contains("model.safetensors"));

  // PEFT's format: names, shapes, config.
  const fs::path adapter = fs::path(dir.path()) / "adapter";
  hf::ExportCheckpoint(checkpoints, adapter.string());
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(adapter / "adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["task_type"], "CAUSAL_LM");
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["lora_alpha"], 8.0);
  EXPECT_EQ(config["target_modules"].size(), 7u);
  EXPECT_EQ(config["base_model_name_or_path"], fs::absolute(base).lexically_normal().string());
  const hf::SafetensorsFile weights((adapter / "adapter_model.safetensors").string());
  EXPECT_EQ(weights.tensors().size(), 28u);
  const hf::HfModelConfig& c = static_cast<HfCausalLMImpl&>(*trainer.model()).config();
  const auto& qa = weights.tensors().at("base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight");
  const auto& kb = weights.tensors().at("base_model.model.model.layers.1.self_attn.k_proj.lora_B.weight");
  const auto& da = weights.tensors().at("base_model.model.model.layers.0.mlp.down_proj.lora_A.weight");
  EXPECT_EQ(qa.shape, (std::vector<int64_t>{4, c.hidden_size}));
  EXPECT_EQ(kb.shape, (std::vector<int64_t>{c.num_key_value_heads * c.head_dim, 4}));
  EXPECT_EQ(da.shape, (std::vector<int64_t>{4, c.intermediate_size}));

  // --merge: the full model, whose logits are the adapted model's within fp32 rounding.
  const fs::path merged_dir = fs::path(dir.path()) / "merged";
  hf::ExportCheckpoint(checkpoints, merged_dir.string(), "", hf::kDefaultMaxShardBytes, /*merge_lora=*/true);
  HfCausalLM merged = LoadHfCausalLM(merged_dir.string(), 16);
  torch::manual_seed(4);
  const torch::Tensor tokens = torch::randint(0, c.vocab_size, {2, 12}, torch::kInt64);
  torch::NoGradGuard no_grad;
  trainer.model()->eval();
  const torch::Tensor adapted = trainer.model()->forward(tokens);
  const torch::Tensor want = merged->forward(tokens);
  EXPECT_TRUE(testing::WithinForwardRounding(merged, 12, want, adapted));
  {
    AdaptersOff off(*trainer.model());
    EXPECT_FALSE(torch::allclose(trainer.model()->forward(tokens), adapted)) << "the adapters changed the model";
  }

  // headroom-worker logits --model BASE --adapter DIR: the merged model's logits.
  auto logits = [](std::vector<std::string> args) {
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    std::ostringstream out, err;
    EXPECT_EQ(RunModelCommand(static_cast<int>(argv.size()), argv.data(), out, err), 0) << err.str();
    const nlohmann::json rows = nlohmann::json::parse(out.str());
    std::vector<float> flat;
    for (const auto& row : rows) {
      for (const auto& v : row) flat.push_back(v.get<float>());
    }
    return torch::tensor(flat).view({static_cast<int64_t>(rows.size()), -1});
  };
  const std::string ids = "5,17,33,2,90,41,7";
  const torch::Tensor with_adapter =
      logits({"logits", "--model", base.string(), "--adapter", adapter.string(), "--ids", ids});
  const torch::Tensor of_merged = logits({"logits", "--model", merged_dir.string(), "--ids", ids});
  EXPECT_TRUE(testing::WithinForwardRounding(merged, 7, with_adapter, of_merged));
  EXPECT_FALSE(torch::allclose(logits({"logits", "--model", base.string(), "--ids", ids}), of_merged));

  // spec.model.lora.from: the exported adapter is the starting point of another job.
  spec::TrainingJobSpec from = spec;
  from.model.lora.from = adapter.string();
  GrpoTrainer resumed(from, *comm, torch::kCPU);
  resumed.model()->eval();
  EXPECT_TRUE(torch::equal(resumed.model()->forward(tokens), adapted));
  spec::TrainingJobSpec wrong = from;
  wrong.model.lora.r = 8;
  try {
    GrpoTrainer refused(wrong, *comm, torch::kCPU);
    ADD_FAILURE() << "an adapter of rank 4 loaded into rank 8";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("adapter_config.json"), std::string::npos) << e.what();
  }

  // Another base under the same path: the resume is refused, naming the weight file.
  {
    std::fstream f(base / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-4, std::ios::end);
    const char other[4] = {static_cast<char>(0xdb), 0x0f, 0x49, 0x40};  // pi: the last weight changed
    f.write(other, 4);
  }
  GrpoTrainer again(spec, *comm, torch::kCPU);
  Checkpointer checkpointer(checkpoints, spec, *comm, 0, again);
  try {
    checkpointer.Resume();
    ADD_FAILURE() << "resumed LoRA adapters on a changed base";
  } catch (const CheckpointOfAnotherRun& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sha256"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headroom::worker
