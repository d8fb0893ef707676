// `headroom plan` for a job naming a Hugging Face model directory: the plan is sized from
// that directory's config.json, and a config it cannot read is an error naming the field.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/headroom_binary.h"

namespace {
namespace fs = std::filesystem;

using Result = headroom::testing::CommandResult;

Result Plan(const fs::path& job) { return headroom::testing::RunHeadroom("plan " + job.string() + " --json"); }

// configs/reverse-tiny.yaml with its model replaced by `model`.
fs::path Job(const fs::path& dir, const std::string& model) {
  std::ifstream in(fs::path(HEADROOM_SOURCE_DIR) / "configs/reverse-tiny.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  const std::string preset = "model: {preset: tiny}";
  const auto at = yaml.find(preset);
  EXPECT_NE(at, std::string::npos) << "configs/reverse-tiny.yaml changed its model line";
  yaml.replace(at, preset.size(), "model: " + model);
  const fs::path job = dir / "job.yaml";
  std::ofstream(job) << yaml;
  return job;
}

class Scratch {
 public:
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "headroom-plan-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~Scratch() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(PlanModelPath, SizedFromTheConfigJson) {
  Scratch dir;
  fs::create_directories(dir.path() / "qwen");
  // Qwen2.5-0.5B's config.json (the fields the plan reads).
  std::ofstream(dir.path() / "qwen" / "config.json") << R"({"architectures": ["Qwen2ForCausalLM"],
    "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
    "num_attention_heads": 14, "num_key_value_heads": 2, "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16"})";
  const Result r = Plan(Job(dir.path(), "{path: " + (dir.path() / "qwen").string() + "}"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto plan = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan["parameters"].get<int64_t>(), 494032768);  // Qwen2.5-0.5B's published count
  EXPECT_EQ(plan["model"], "Qwen2ForCausalLM config.json");
}

TEST(PlanModelPath, AnUnreadableConfigIsNamed) {
  Scratch dir;
  const Result r = Plan(Job(dir.path(), "{path: " + (dir.path() / "absent").string() + "}"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("spec.model.path"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("config.json"), std::string::npos) << r.out;
}

}  // namespace
