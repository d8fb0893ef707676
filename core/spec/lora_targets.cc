#include "core/spec/lora_targets.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace headroom::spec {

const std::vector<std::string>& LoraModuleNames(hf::Architecture /*architecture*/) {
  static const std::vector<std::string> names = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return names;
}

std::vector<std::string> LoraTargetNames() {
  std::vector<std::string> names = LoraModuleNames(hf::Architecture::kLlama);
  for (hf::Architecture a : {hf::Architecture::kQwen2, hf::Architecture::kQwen3}) {
    for (const std::string& n : LoraModuleNames(a)) {
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
  }
  names.push_back(kLoraAllLinear);
  return names;
}

std::optional<LinearShape> LoraModuleShape(const hf::HfModelConfig& c, const std::string& module) {
  const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  if (module == "q_proj") return LinearShape{c.hidden_size, q};
  if (module == "k_proj" || module == "v_proj") return LinearShape{c.hidden_size, kv};
  if (module == "o_proj") return LinearShape{q, c.hidden_size};
  if (module == "gate_proj" || module == "up_proj") return LinearShape{c.hidden_size, c.intermediate_size};
  if (module == "down_proj") return LinearShape{c.intermediate_size, c.hidden_size};
  return std::nullopt;
}

std::vector<std::string> LoraTargets(const LoraSpec& lora, hf::Architecture architecture) {
  const std::vector<std::string>& all = LoraModuleNames(architecture);
  if (lora.target_modules.empty()) return {"q_proj", "v_proj"};
  if (std::find(lora.target_modules.begin(), lora.target_modules.end(), kLoraAllLinear) != lora.target_modules.end()) {
    return all;
  }
  std::vector<std::string> out;
  for (const std::string& n : all) {
    if (std::find(lora.target_modules.begin(), lora.target_modules.end(), n) != lora.target_modules.end()) {
      out.push_back(n);
    }
  }
  return out;
}

double LoraScale(const LoraSpec& lora) {
  if (lora.r <= 0) return 0;
  const double alpha = lora.alpha > 0 ? lora.alpha : lora.r;
  return lora.rs_lora ? alpha / std::sqrt(static_cast<double>(lora.r)) : alpha / lora.r;
}

int64_t LoraParameterCount(const hf::HfModelConfig& c, const LoraSpec& lora) {
  if (!lora.enabled()) return 0;
  int64_t per_block = 0;
  for (const std::string& m : LoraTargets(lora, c.architecture)) {
    if (auto shape = LoraModuleShape(c, m)) per_block += int64_t{lora.r} * (shape->in + shape->out);
  }
  return per_block * c.num_hidden_layers;
}

std::string PeftAdapterConfigProblem(const std::string& dir, const LoraSpec& lora) {
  const std::string file = (std::filesystem::path(dir) / "adapter_config.json").string();
  std::ifstream in(file);
  if (!in) return file + ": cannot be read (a PEFT adapter directory holds adapter_config.json)";
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return file + ": not a JSON object";
  auto text = [](const nlohmann::json& v) { return v.dump(); };
  if (j.value("peft_type", std::string()) != "LORA") {
    return file + ": peft_type is " + (j.contains("peft_type") ? text(j["peft_type"]) : "missing") + ", not \"LORA\"";
  }
  if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int64_t>() != lora.r) {
    return file + ": r is " + (j.contains("r") ? text(j["r"]) : "missing") + ", spec.model.lora.r is " +
           std::to_string(lora.r);
  }
  const std::vector<std::string> wanted = LoraTargets(lora, hf::Architecture::kLlama);
  std::set<std::string> theirs;
  const nlohmann::json& t = j.contains("target_modules") ? j["target_modules"] : nlohmann::json();
  if (t.is_string() && t.get<std::string>() == kLoraAllLinear) {
    for (const std::string& n : LoraModuleNames(hf::Architecture::kLlama)) theirs.insert(n);
  } else if (t.is_array()) {
    for (const auto& n : t) {
      if (n.is_string()) theirs.insert(n.get<std::string>());
    }
  }
  if (theirs != std::set<std::string>(wanted.begin(), wanted.end())) {
    std::string mine;
    for (const std::string& n : wanted) mine += (mine.empty() ? "" : ", ") + n;
    return file + ": target_modules is " + (t.is_null() ? "missing" : text(t)) +
           ", spec.model.lora.targetModules is [" + mine + "]";
  }
  const double alpha = lora.alpha > 0 ? lora.alpha : lora.r;
  if (j.contains("lora_alpha") && j["lora_alpha"].is_number() && j["lora_alpha"].get<double>() != alpha) {
    return file + ": lora_alpha is " + text(j["lora_alpha"]) + ", spec.model.lora.alpha is " + std::to_string(alpha);
  }
  if (j.value("use_rslora", false) != lora.rs_lora) {
    return file + ": use_rslora is " + text(j.value("use_rslora", false)) + ", spec.model.lora.rsLora is " +
           (lora.rs_lora ? "true" : "false");
  }
  return "";
}

LoraSpec LoraSpecOfPeftAdapter(const std::string& dir) {
  const std::string file = (std::filesystem::path(dir) / "adapter_config.json").string();
  std::ifstream in(file);
  if (!in) throw std::invalid_argument(file + ": cannot be read (a PEFT adapter directory holds adapter_config.json)");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw std::invalid_argument(file + ": not a JSON object");
  if (j.value("peft_type", std::string()) != "LORA") throw std::invalid_argument(file + ": peft_type is not \"LORA\"");
  LoraSpec l;
  if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int64_t>() < 1) {
    throw std::invalid_argument(file + ": r must be a positive integer");
  }
  l.r = j["r"].get<int>();
  l.alpha = j.contains("lora_alpha") && j["lora_alpha"].is_number() ? j["lora_alpha"].get<double>() : 8.0;
  l.dropout = j.contains("lora_dropout") && j["lora_dropout"].is_number() ? j["lora_dropout"].get<double>() : 0.0;
  l.rs_lora = j.value("use_rslora", false);
  const nlohmann::json& t = j.contains("target_modules") ? j["target_modules"] : nlohmann::json();
  if (t.is_string()) {
    l.target_modules = {t.get<std::string>()};
  } else if (t.is_array()) {
    for (const auto& n : t) {
      if (!n.is_string()) throw std::invalid_argument(file + ": target_modules holds a non-string");
      l.target_modules.push_back(n.get<std::string>());
    }
  }
  const std::vector<std::string> known = LoraTargetNames();
  for (const std::string& n : l.target_modules) {
    if (std::find(known.begin(), known.end(), n) == known.end()) {
      throw std::invalid_argument(file + ": target_modules names \"" + n + "\", which headroom's models do not have");
    }
  }
  l.from = dir;
  return l;
}

}  // namespace headroom::spec
