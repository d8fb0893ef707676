#include "core/hf/hf_config.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/files/input_file.h"

namespace headroom::hf {
namespace {

using nlohmann::json;

class Reader {
 public:
  Reader(const json& j, std::string file) : j_(j), file_(std::move(file)) {}

  [[noreturn]] void Fail(const std::string& field, const std::string& why) const {
    throw HfConfigError(file_ + ": " + field + ": " + why);
  }
  int64_t Int(const json& obj, const std::string& field, const std::string& path, bool required,
              int64_t fallback) const {
    if (!obj.contains(field) || obj[field].is_null()) {
      if (required) Fail(path, "required, missing");
      return fallback;
    }
    const json& v = obj[field];
    if (!v.is_number_integer()) Fail(path, "must be an integer, got " + v.dump());
    return v.get<int64_t>();
  }
  double Number(const json& obj, const std::string& field, const std::string& path, double fallback) const {
    if (!obj.contains(field) || obj[field].is_null()) return fallback;
    const json& v = obj[field];
    if (!v.is_number()) Fail(path, "must be a number, got " + v.dump());
    return v.get<double>();
  }
  bool Bool(const json& obj, const std::string& field, bool fallback) const {
    if (!obj.contains(field) || obj[field].is_null()) return fallback;
    if (!obj[field].is_boolean()) Fail(field, "must be true or false, got " + obj[field].dump());
    return obj[field].get<bool>();
  }
  const json& root() const { return j_; }
  const std::string& file() const { return file_; }

 private:
  const json& j_;
  std::string file_;
};

void ReadRope(const Reader& r, const json& rope, const std::string& path, HfModelConfig& c) {
  if (!rope.is_object()) r.Fail(path, "must be an object, got " + rope.dump());
  std::string type = "default";
  for (const char* key : {"rope_type", "type"}) {
    if (rope.contains(key) && rope[key].is_string()) {
      type = rope[key].get<std::string>();
      break;
    }
  }
  c.rope_theta = r.Number(rope, "rope_theta", path + ".rope_theta", c.rope_theta);
  if (type == "default") return;
  if (type != "llama3") {
    r.Fail(path + ".rope_type", "\"" + type + "\" is not supported (default, llama3)");
  }
  c.rope_scaling.type = type;
  c.rope_scaling.factor = r.Number(rope, "factor", path + ".factor", 8.0);
  c.rope_scaling.low_freq_factor = r.Number(rope, "low_freq_factor", path + ".low_freq_factor", 1.0);
  c.rope_scaling.high_freq_factor = r.Number(rope, "high_freq_factor", path + ".high_freq_factor", 4.0);
  c.rope_scaling.original_max_position_embeddings =
      r.Int(rope, "original_max_position_embeddings", path + ".original_max_position_embeddings", false, 8192);
  if (!(c.rope_scaling.factor > 0) || !(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor)) {
    r.Fail(path, "llama3 scaling needs factor > 0 and high_freq_factor > low_freq_factor");
  }
}

// The model's sizes: each required one >= 1 and within its bound (MaxDimension), and the
// attention heads consistent (the parameter total is checked once every field is read).
void ReadDimensions(const Reader& r, const json& j, HfModelConfig& c) {
  c.vocab_size = r.Int(j, "vocab_size", "vocab_size", true, 0);
  c.hidden_size = r.Int(j, "hidden_size", "hidden_size", true, 0);
  c.intermediate_size = r.Int(j, "intermediate_size", "intermediate_size", true, 0);
  c.num_hidden_layers = r.Int(j, "num_hidden_layers", "num_hidden_layers", true, 0);
  c.num_attention_heads = r.Int(j, "num_attention_heads", "num_attention_heads", true, 0);
  c.num_key_value_heads = r.Int(j, "num_key_value_heads", "num_key_value_heads", false, c.num_attention_heads);
  for (auto [name, v] : {std::pair<const char*, int64_t>{"vocab_size", c.vocab_size},
                         {"hidden_size", c.hidden_size},
                         {"intermediate_size", c.intermediate_size},
                         {"num_hidden_layers", c.num_hidden_layers},
                         {"num_attention_heads", c.num_attention_heads},
                         {"num_key_value_heads", c.num_key_value_heads}}) {
    if (v < 1) r.Fail(name, "must be >= 1, got " + std::to_string(v));
    if (v > MaxDimension(name)) {
      r.Fail(name, std::to_string(v) + " is above " + std::to_string(MaxDimension(name)) +
                       ", the largest headroom reads (see hf_config.h)");
    }
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    r.Fail("num_key_value_heads", std::to_string(c.num_key_value_heads) + " does not divide num_attention_heads " +
                                      std::to_string(c.num_attention_heads));
  }
  const bool explicit_head_dim = j.contains("head_dim") && !j["head_dim"].is_null();
  if (!explicit_head_dim && c.hidden_size % c.num_attention_heads != 0) {
    r.Fail("head_dim", "missing, and hidden_size is not a multiple of num_attention_heads");
  }
  c.head_dim = r.Int(j, "head_dim", "head_dim", false, c.hidden_size / c.num_attention_heads);
  if (c.head_dim < 2 || c.head_dim % 2 != 0) r.Fail("head_dim", "must be even and >= 2 (rotary embeddings)");
  if (c.head_dim > MaxDimension("head_dim")) {
    r.Fail("head_dim", std::to_string(c.head_dim) + " is above " + std::to_string(MaxDimension("head_dim")) +
                           ", the largest headroom reads (see hf_config.h)");
  }
  c.max_position_embeddings = r.Int(j, "max_position_embeddings", "max_position_embeddings", false, 4096);
  if (c.max_position_embeddings < 1 || c.max_position_embeddings > MaxDimension("max_position_embeddings")) {
    r.Fail("max_position_embeddings", "must be in [1, " + std::to_string(MaxDimension("max_position_embeddings")) +
                                          "], got " + std::to_string(c.max_position_embeddings));
  }
}

}  // namespace

int64_t MaxDimension(const std::string& field) {
  if (field == "vocab_size") return int64_t{1} << 24;
  if (field == "hidden_size") return int64_t{1} << 17;
  if (field == "intermediate_size") return int64_t{1} << 20;
  if (field == "max_position_embeddings") return int64_t{1} << 24;
  return int64_t{1} << 12;  // num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim
}

std::vector<int64_t> ReadEosTokenIds(const json& object, const std::string& file) {
  const auto it = object.find("eos_token_id");
  if (it == object.end() || it->is_null()) return {};
  std::vector<int64_t> ids;
  for (const auto& v : it->is_array() ? *it : json::array({*it})) {
    if (!v.is_number_integer()) throw HfConfigError(file + ": eos_token_id: not an integer or a list of them");
    const int64_t id = v.get<int64_t>();
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

int64_t HfModelConfig::ParameterCount() const {
  const int64_t q = num_attention_heads * head_dim, kv = num_key_value_heads * head_dim;
  int64_t per_layer = hidden_size * q + 2 * hidden_size * kv + q * hidden_size  // q, k, v, o
                      + 3 * hidden_size * intermediate_size                     // gate, up, down
                      + 2 * hidden_size;                                        // two RMSNorms
  if (attention_bias) per_layer += q + 2 * kv;
  if (qk_norm) per_layer += 2 * head_dim;
  int64_t total = num_hidden_layers * per_layer + vocab_size * hidden_size + hidden_size;
  if (!tie_word_embeddings) total += vocab_size * hidden_size;
  if (learned_positions) total += max_position_embeddings * hidden_size;
  return total;
}

HfModelConfig ParseHfConfig(const std::string& json_text, const std::string& file) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw HfConfigError(file + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw HfConfigError(file + ": must be a JSON object");
  Reader r(j, file);
  HfModelConfig c;
  if (!j.contains("architectures") || !j["architectures"].is_array() || j["architectures"].empty() ||
      !j["architectures"][0].is_string()) {
    r.Fail("architectures", "required: a list naming the model class, e.g. [\"Qwen2ForCausalLM\"]");
  }
  c.architecture_name = j["architectures"][0].get<std::string>();
  if (c.architecture_name == "Qwen2ForCausalLM") {
    c.architecture = Architecture::kQwen2;
  } else if (c.architecture_name == "Qwen3ForCausalLM") {
    c.architecture = Architecture::kQwen3;
  } else if (c.architecture_name == "LlamaForCausalLM") {
    c.architecture = Architecture::kLlama;
  } else {
    r.Fail("architectures",
           "\"" + c.architecture_name + "\" is not supported (Qwen2ForCausalLM, Qwen3ForCausalLM, LlamaForCausalLM)");
  }
  ReadDimensions(r, j, c);
  c.rms_norm_eps = r.Number(j, "rms_norm_eps", "rms_norm_eps", 1e-6);
  c.tie_word_embeddings = r.Bool(j, "tie_word_embeddings", false);
  c.attention_bias = c.architecture == Architecture::kQwen2 || r.Bool(j, "attention_bias", false);
  c.qk_norm = c.architecture == Architecture::kQwen3;
  if (j.contains("mlp_bias") && r.Bool(j, "mlp_bias", false)) r.Fail("mlp_bias", "true is not supported");
  if (j.contains("hidden_act") && j["hidden_act"] != "silu") {
    r.Fail("hidden_act", j["hidden_act"].dump() + " is not supported (silu)");
  }
  // Rotary parameters: 5.x nests them in rope_parameters; 4.x has rope_theta and
  // rope_scaling at the top level.
  c.rope_theta = r.Number(j, "rope_theta", "rope_theta", 10000.0);
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    ReadRope(r, j["rope_parameters"], "rope_parameters", c);
  } else if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    ReadRope(r, j["rope_scaling"], "rope_scaling", c);
  }
  // Each dimension within its bound keeps this product inside int64 (below 2^57).
  if (c.ParameterCount() > kMaxParameters) {
    r.Fail("vocab_size", "with hidden_size, intermediate_size and num_hidden_layers this model has " +
                             std::to_string(c.ParameterCount()) + " parameters, above the " +
                             std::to_string(kMaxParameters) + " headroom reads (see hf_config.h)");
  }
  c.eos_token_ids = ReadEosTokenIds(j, file);
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (j.contains(key) && j[key].is_string()) {
      c.dtype = j[key].get<std::string>();
      if (c.dtype != "bfloat16" && c.dtype != "float16" && c.dtype != "float32") {
        r.Fail(key, "\"" + c.dtype + "\" is not supported (bfloat16, float16, float32)");
      }
      break;
    }
  }
  return c;
}

HfModelConfig LoadHfConfig(const std::string& model_dir) {
  const std::string file = model_dir + "/config.json";
  std::string text;
  try {
    text = files::ReadWholeFile(file, files::kMaxJsonFileBytes, "a config.json");
  } catch (const files::InputFileError& e) {
    throw HfConfigError(std::string(e.what()) + " (spec.model.path must be a Hugging Face model directory)");
  }
  return ParseHfConfig(text, file);
}

}  // namespace headroom::hf
