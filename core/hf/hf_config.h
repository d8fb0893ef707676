// A Hugging Face causal LM's config.json, as transformers 4.x and 5.x write it, for the
// architectures headroom trains: Qwen2ForCausalLM, Qwen3ForCausalLM, LlamaForCausalLM.
//
// Read: architectures[0], vocab_size, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads (default: num_attention_heads), head_dim
// (default hidden/heads), rms_norm_eps, max_position_embeddings, tie_word_embeddings,
// attention_bias (Llama; Qwen2 always has q/k/v biases, Qwen3 none), torch_dtype or (5.x)
// dtype, eos_token_id (see ReadEosTokenIds), and the rotary parameters: rope_theta +
// rope_scaling at the top level (4.x) or rope_parameters {rope_type, rope_theta, ...}
// (5.x). Rope scaling: none/"default" or Llama 3's "llama3" (factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings); any other type is refused.
//
// Every refusal is an HfConfigError whose message names the file and the field.
//
// Absurd sizes are refused before anything is allocated for them (a vocab_size of 2^40
// would otherwise end in LibTorch's allocator): each dimension has a bound (MaxDimension)
// 16 to 100 times the largest in published checkpoints (vocabularies of ~256K, hidden
// sizes to 16K and FFNs to 53K in Llama 3 405B, 126 layers, 128K positions), and the
// whole model at most kMaxParameters, ~2.2 trillion: twice the largest open model, and
// 35 TB of fp32 master weights and AdamW state, beyond any job headroom could plan.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace headroom::hf {

// An invalid_argument: a bad model directory is bad input (the worker exits 2), not a crash.
class HfConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

enum class Architecture { kQwen2, kQwen3, kLlama };

struct RopeScaling {
  std::string type = "default";  // default | llama3
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct HfModelConfig {
  Architecture architecture = Architecture::kQwen2;
  std::string architecture_name;  // as written, e.g. "Qwen2ForCausalLM"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (always for Qwen2)
  bool qk_norm = false;         // per-head RMSNorm on queries and keys (Qwen3)
  // A learned absolute position table [max_position_embeddings, hidden] added to the token
  // embedding (model.embed_positions.weight), on top of the rotary positions. No config.json
  // sets it: the presets do (core/spec/model_presets.h), because from scratch a small model
  // learns which prompt digit to copy far faster with it.
  bool learned_positions = false;
  std::string dtype = "float32";  // bfloat16 | float16 | float32: how the weights are stored
  // config.json's eos_token_id (ReadEosTokenIds); empty for a preset. The stop tokens fall
  // back to it when generation_config.json sets none (eos_ids.h), so that config.json is
  // read once.
  std::vector<int64_t> eos_token_ids;

  // Parameters of the model, embeddings and head included (the head once when tied).
  int64_t ParameterCount() const;
};

inline constexpr int64_t kMaxParameters = int64_t{1} << 41;
// The largest value read for a config.json dimension ("vocab_size", "hidden_size",
// "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
// "head_dim", "max_position_embeddings").
int64_t MaxDimension(const std::string& field);

// The "eos_token_id" of `object`, the JSON of `file` (config.json or
// generation_config.json): an integer or a list of them, kept in order without repeats;
// empty when the field is absent or null. Anything else throws HfConfigError
// "<file>: eos_token_id: ...".
std::vector<int64_t> ReadEosTokenIds(const nlohmann::json& object, const std::string& file);

// Parses the JSON text of `file` (named in errors).
HfModelConfig ParseHfConfig(const std::string& json_text, const std::string& file);
// Reads <dir>/config.json: a regular file (a FIFO is refused, not waited on) of at most
// files::kMaxJsonFileBytes.
HfModelConfig LoadHfConfig(const std::string& model_dir);

}  // namespace headroom::hf
