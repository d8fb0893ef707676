#include "worker/cli/model_commands.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <sstream>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/hf/eos_ids.h"
#include "core/hf/hf_config.h"
#include "core/hf/safetensors.h"
#include "core/protocol/exit_codes.h"
#include "worker/cli/log_to_stream.h"
#include "worker/cli/parse_arguments.h"
#include "core/spec/lora_targets.h"
#include "worker/model/hf_causal_lm.h"
#include "worker/model/lora.h"

namespace headroom::worker {
namespace {
namespace fs = std::filesystem;

// A problem with what the user passed (arguments, model directory): exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<int64_t> ParseIds(const std::string& text) {
  std::vector<int64_t> ids;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (ec != std::errc() || end != item.data() + item.size() || id < 0) {
      throw UsageError("--ids: '" + item + "' is not a token id (a non-negative integer)");
    }
    ids.push_back(id);
  }
  if (ids.empty()) throw UsageError("--ids: no token ids given (e.g. --ids 1,5,9)");
  return ids;
}

void CheckVocabulary(const std::vector<int64_t>& ids, const hf::HfModelConfig& config, const std::string& dir) {
  for (int64_t id : ids) {
    if (id >= config.vocab_size) {
      throw UsageError("--ids: token " + std::to_string(id) + " is outside the vocabulary (vocab_size " +
                       std::to_string(config.vocab_size) + " in " + (fs::path(dir) / "config.json").string() + ")");
    }
  }
}

torch::Device ParseDevice(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  if (name == "cuda") {
    if (!torch::cuda::is_available()) throw UsageError("--device cuda: no CUDA device is available to this process");
    return torch::kCUDA;
  }
  throw UsageError("--device: '" + name + "' is not cpu or cuda");
}

// Shortest round-trip decimal; JSON has no NaN or infinity, so a non-finite logit (from
// finite weights, an overflow) is null.
void WriteFloat(std::ostream& out, float v) {
  if (!std::isfinite(v)) {
    out << "null";
    return;
  }
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.write(buf, end - buf);
}

// --adapter: a PEFT LoRA adapter directory on the base, as the trained model computes it.
void WithAdapter(HfCausalLMImpl& model, const std::string& dir) {
  if (dir.empty()) return;
  spec::LoraSpec lora;
  try {
    lora = spec::LoraSpecOfPeftAdapter(dir);
    ApplyLora(model, LoraOptionsOf(lora, 1));
    LoadPeftAdapter(model, dir, lora);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--adapter: ") + e.what());
  }
}

struct Options {
  std::string model;
  std::string adapter;
  std::string ids;
  std::string device = "cpu";
  int64_t max_new_tokens = 16;
};

int Logits(const Options& o, std::ostream& out) {
  const auto ids = ParseIds(o.ids);
  const auto device = ParseDevice(o.device);
  HfCausalLM model = LoadHfCausalLM(o.model, static_cast<int64_t>(ids.size()));
  WithAdapter(*model, o.adapter);
  CheckVocabulary(ids, model->config(), o.model);
  model->to(device);
  model->eval();
  torch::NoGradGuard no_grad;
  const auto tokens = torch::tensor(ids, torch::kInt64).unsqueeze(0).to(device);
  const auto logits = model->forward(tokens).squeeze(0).to(torch::kCPU, torch::kFloat32).contiguous();
  const auto rows = logits.accessor<float, 2>();
  out << "[";
  for (int64_t t = 0; t < rows.size(0); ++t) {
    out << (t ? ",\n[" : "[");
    for (int64_t v = 0; v < rows.size(1); ++v) {
      if (v) out << ",";
      WriteFloat(out, rows[t][v]);
    }
    out << "]";
  }
  out << "]\n";
  return protocol::kExitFinished;
}

int Generate(const Options& o, std::ostream& out) {
  auto ids = ParseIds(o.ids);
  if (o.max_new_tokens < 0) throw UsageError("--max-new-tokens: must be >= 0");
  const auto device = ParseDevice(o.device);
  const int64_t total = static_cast<int64_t>(ids.size()) + o.max_new_tokens;
  HfCausalLM model = LoadHfCausalLM(o.model, total);
  WithAdapter(*model, o.adapter);
  const std::vector<int64_t> eos = hf::LoadEosTokenIds(o.model, model->config());
  CheckVocabulary(ids, model->config(), o.model);
  model->to(device);
  model->eval();
  torch::NoGradGuard no_grad;
  KvCache cache(model->kv_cache_shape(), 1, total, device);
  cache.Reset(1);
  auto input = torch::tensor(ids, torch::kInt64).unsqueeze(0).to(device);
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    const int64_t next = model->ForwardCached(input, cache).argmax(-1).item<int64_t>();
    ids.push_back(next);
    if (std::find(eos.begin(), eos.end(), next) != eos.end()) break;
    input = torch::tensor({next}, torch::kInt64).unsqueeze(0).to(device);
  }
  out << nlohmann::json(ids).dump() << "\n";
  return protocol::kExitFinished;
}

// Says why `command` failed on `err`, and returns `exit_code`.
int Failed(std::ostream& err, const std::string& command, const char* why, int exit_code) {
  err << "headroom-worker " << command << ": " << why << "\n";
  return exit_code;
}

}  // namespace

bool IsModelCommand(const std::string& command) { return command == "logits" || command == "generate"; }

int RunModelCommand(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  const std::string command = argc > 0 ? argv[0] : "";
  Options o;
  CLI::App app{command == "logits" ? "headroom-worker logits: the fp32 logits of a Hugging Face model at every position"
                                   : "headroom-worker generate: the prompt and its greedy continuation"};
  app.name("headroom-worker " + command);
  app.add_option("--model", o.model, "Hugging Face model directory (config.json, *.safetensors)")->required();
  app.add_option("--ids", o.ids, "prompt token ids, comma-separated (e.g. 1,5,9)")->required();
  app.add_option("--device", o.device, "cpu (default) or cuda");
  app.add_option("--adapter", o.adapter,
                 "a PEFT LoRA adapter directory (adapter_config.json, "
                 "adapter_model.safetensors) applied to --model");
  if (command == "generate") {
    app.add_option("--max-new-tokens", o.max_new_tokens, "greedy tokens to add (default 16)");
  }
  if (const auto exit_code = ParseArguments(app, argc, argv, out, err)) return *exit_code;
  const LogToStream log_to_err(err);  // stdout holds only the JSON result
  try {
    return command == "logits" ? Logits(o, out) : Generate(o, out);
  } catch (const UsageError& e) {
    return Failed(err, command, e.what(), protocol::kExitInvalidSpec);
  } catch (const hf::HfConfigError& e) {
    return Failed(err, command, e.what(), protocol::kExitInvalidSpec);
  } catch (const hf::SafetensorsError& e) {
    return Failed(err, command, e.what(), protocol::kExitInvalidSpec);
  } catch (const c10::Error& e) {
    return Failed(err, command, e.what_without_backtrace(), protocol::kExitFailure);
  } catch (const std::exception& e) {
    return Failed(err, command, e.what(), protocol::kExitFailure);
  }
}

}  // namespace headroom::worker
