#include <spdlog/spdlog.h>

#include "worker/model/model_source.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "core/hf/eos_ids.h"
#include "core/hf/hub_cache.h"
#include "core/spec/model_presets.h"
#include "worker/model/hf_causal_lm.h"

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;

// Throws std::invalid_argument ("model: <what>") naming the first dimension of a preset
// configuration the model cannot be built with.
void ValidatePresetConfig(const hf::HfModelConfig& c, int64_t max_seq_len) {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("model: " + what);
  };
  need(c.vocab_size >= 4, "vocab_size must be >= 4, got " + std::to_string(c.vocab_size));
  need(c.num_hidden_layers >= 1, "layers must be >= 1, got " + std::to_string(c.num_hidden_layers));
  need(c.hidden_size >= 1, "hidden must be >= 1, got " + std::to_string(c.hidden_size));
  need(c.num_attention_heads >= 1 && c.hidden_size % c.num_attention_heads == 0,
       "heads must divide hidden, got heads " + std::to_string(c.num_attention_heads) + " hidden " +
           std::to_string(c.hidden_size));
  // Rotary embeddings rotate pairs of a head's dimensions.
  need(c.head_dim % 2 == 0, "hidden / heads must be even (rotary positions), got " + std::to_string(c.head_dim));
  need(c.intermediate_size >= 1, "ffn_hidden must be >= 1, got " + std::to_string(c.intermediate_size));
  need(max_seq_len >= 2, "max_seq_len must be >= 2, got " + std::to_string(max_seq_len));
}

HfTokenizer LoadTokenizer(const std::string& model_dir) {
  if (model_dir.empty()) {
    throw std::invalid_argument("spec.model.path: a text task (spec.task.dataset.path set) needs a Hugging Face "
                                "model directory for its tokenizer");
  }
  try {
    return HfTokenizer::Load(model_dir);
  } catch (const TokenizerError& e) {
    throw std::invalid_argument(std::string("spec.model.path: ") + e.what());
  }
}

// Stop tokens as ModelTokens says: the tokenizer's eos_token, then generation_config.json's
// eos_token_id (the ids generate() stops at), else config.json's (from `config`, read
// once). Chat models often list their end-of-turn token only in one of them
// (Qwen2.5-Instruct: <|im_end|> as eos_token, <|endoftext|> too in generation_config), and
// a response may end at either.
std::vector<int64_t> StopTokens(const HfTokenizer& tokenizer, const std::string& model_dir,
                                const hf::HfModelConfig& config) {
  std::vector<int64_t> stops;
  auto add = [&](int64_t id) {
    if (std::find(stops.begin(), stops.end(), id) == stops.end()) stops.push_back(id);
  };
  if (const auto eos = tokenizer.eos_token()) {
    const auto id = tokenizer.TokenId(*eos);
    if (!id) {
      throw std::invalid_argument("spec.model.path: " + (fs::path(model_dir) / "tokenizer_config.json").string() +
                                  ": eos_token \"" + *eos + "\" is not a token of tokenizer.json");
    }
    add(*id);
  }
  for (int64_t id : hf::LoadEosTokenIds(model_dir, config)) add(id);
  if (stops.empty()) {
    throw std::invalid_argument("spec.model.path: " + model_dir +
                                ": no stop token (tokenizer_config.json eos_token, generation_config.json or "
                                "config.json eos_token_id): a response could never end");
  }
  return stops;
}

ModelTokens TokensOf(HfTokenizer tokenizer, const std::string& model_dir, const hf::HfModelConfig& config) {
  const int64_t model_vocab = config.vocab_size;
  ModelTokens tokens{std::move(tokenizer), {}, 0};
  // Every id a task feeds the model or reads back must be one of the model's rows.
  if (tokens.tokenizer.vocab_size() > model_vocab) {
    throw std::invalid_argument("spec.model.path: " + model_dir + ": the tokenizer has " +
                                std::to_string(tokens.tokenizer.vocab_size()) +
                                " ids, more than config.json's vocab_size " + std::to_string(model_vocab));
  }
  tokens.stop_tokens = StopTokens(tokens.tokenizer, model_dir, config);
  tokens.pad = tokens.stop_tokens.front();
  if (const auto pad = tokens.tokenizer.pad_token()) {
    if (const auto id = tokens.tokenizer.TokenId(*pad)) tokens.pad = *id;
  }
  return tokens;
}

// spec.model.path, else a hub reference's snapshot in the cache (the worker has fetched it
// into spec.model.path before), else empty: a preset.
std::string ModelDirectory(const spec::ModelSpec& model) {
  if (!model.path.empty() || model.hub.repo.empty()) return model.path;
  return hf::RequireCachedHubSnapshot(model.hub.repo, model.hub.revision);
}

}  // namespace

ModelSource::ModelSource(const spec::TrainingJobSpec& spec) : dir_(ModelDirectory(spec.model)) {
  // A text task's tokenizer first: without a model directory holding one it cannot start.
  std::optional<HfTokenizer> tokenizer;
  if (spec.task.is_text()) tokenizer = LoadTokenizer(dir_);
  const spec::ModelSpec model = spec::ResolvedModelSpec(spec);
  const int64_t sequence = int64_t{spec.grpo.max_prompt_length} + spec.grpo.max_response_length;
  max_seq_len_ = std::max<int64_t>(model.max_seq_len, sequence);
  if (pretrained()) {
    config_ = hf::LoadHfConfig(dir_);
    plan_shape_ = guard::HfModelShape(config_);
  } else {
    config_ = spec::PresetModelConfig(model);
    config_.max_position_embeddings = max_seq_len_;  // the learned positions cover every position
    ValidatePresetConfig(config_, max_seq_len_);
    seed_ = model.seed;
    plan_shape_ = guard::PresetModelShape(spec);
  }
  if (tokenizer) tokens_ = TokensOf(std::move(*tokenizer), dir_, config_);
}

const ModelTokens& ModelSource::tokens() const {
  if (!tokens_) throw std::logic_error("model source: tokens asked of a job without a text task");
  return *tokens_;
}

CausalLM ModelSource::Build() const { return HfCausalLM(config_, max_seq_len_, seed_); }

CausalLM ModelSource::LoadPolicy() const {
  CausalLM model = Build();  // a pretrained model's random init is overwritten below
  if (pretrained()) LoadHfWeights(static_cast<HfCausalLMImpl&>(*model), dir_);
  return model;
}

CausalLM ModelSource::CopyOf(CausalLM& model) const {
  CausalLM copy = Build();
  torch::NoGradGuard no_grad;
  const NamedTensors from = model->OrderedParameters();
  const NamedTensors to = copy->OrderedParameters();
  for (size_t i = 0; i < from.size(); ++i) to[i].second.copy_(from[i].second.cpu());
  return copy;
}

}  // namespace headroom::worker
