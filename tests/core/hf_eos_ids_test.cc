// LoadEosTokenIds: which file wins (generation_config.json, else config.json's ids as
// LoadHfConfig read them), the forms eos_token_id takes, and the errors that name the file
// and the field.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/hf/eos_ids.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::hf {
namespace {

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// config.json's eos_token_id as LoadHfConfig reads it.
HfModelConfig ConfigWithEos(std::vector<int64_t> ids) {
  HfModelConfig config;
  config.eos_token_ids = std::move(ids);
  return config;
}

TEST(HfEosIds, GenerationConfigWinsOverConfig) {
  testing::TempDir dir;
  Write(dir.path() + "/generation_config.json", R"({"eos_token_id": [151645, 151643, 151645]})");
  EXPECT_EQ(LoadEosTokenIds(dir.path(), ConfigWithEos({7})), (std::vector<int64_t>{151645, 151643}));
}

TEST(HfEosIds, ConfigWhenGenerationConfigIsMissingOrSetsNone) {
  testing::TempDir dir;
  EXPECT_EQ(LoadEosTokenIds(dir.path(), ConfigWithEos({7})), (std::vector<int64_t>{7}));
  Write(dir.path() + "/generation_config.json", R"({"eos_token_id": null, "do_sample": true})");
  EXPECT_EQ(LoadEosTokenIds(dir.path(), ConfigWithEos({7})), (std::vector<int64_t>{7}));
  Write(dir.path() + "/generation_config.json", R"({"do_sample": true})");
  EXPECT_EQ(LoadEosTokenIds(dir.path(), ConfigWithEos({7, 8})), (std::vector<int64_t>{7, 8}));
}

TEST(HfEosIds, NoneDeclaredIsEmpty) {
  testing::TempDir dir;
  EXPECT_TRUE(LoadEosTokenIds(dir.path(), ConfigWithEos({})).empty());
  Write(dir.path() + "/generation_config.json", R"({"pad_token_id": 0})");
  EXPECT_TRUE(LoadEosTokenIds(dir.path(), ConfigWithEos({})).empty());
}

TEST(HfEosIds, MalformedFilesAreNamed) {
  testing::TempDir dir;
  Write(dir.path() + "/generation_config.json", R"({"eos_token_id": "</s>"})");
  try {
    LoadEosTokenIds(dir.path(), ConfigWithEos({7}));
    FAIL() << "a string eos_token_id was accepted";
  } catch (const HfConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json: eos_token_id"), std::string::npos) << e.what();
  }
  Write(dir.path() + "/generation_config.json", "[1, 2");
  try {
    LoadEosTokenIds(dir.path(), ConfigWithEos({7}));
    FAIL() << "malformed JSON was accepted";
  } catch (const HfConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json: not a JSON object"), std::string::npos) << e.what();
  }
}

// config.json's own eos_token_id, read with the rest of the config.
TEST(HfEosIds, ConfigJsonsIdsAreReadWithTheConfig) {
  nlohmann::json config = {{"architectures", {"Qwen2ForCausalLM"}},
                           {"vocab_size", 96},
                           {"hidden_size", 32},
                           {"intermediate_size", 64},
                           {"num_hidden_layers", 2},
                           {"num_attention_heads", 4}};
  EXPECT_TRUE(ParseHfConfig(config.dump(), "/m/config.json").eos_token_ids.empty());
  config["eos_token_id"] = nullptr;
  EXPECT_TRUE(ParseHfConfig(config.dump(), "/m/config.json").eos_token_ids.empty());
  config["eos_token_id"] = 7;
  EXPECT_EQ(ParseHfConfig(config.dump(), "/m/config.json").eos_token_ids, (std::vector<int64_t>{7}));
  config["eos_token_id"] = {9, 7, 9};
  EXPECT_EQ(ParseHfConfig(config.dump(), "/m/config.json").eos_token_ids, (std::vector<int64_t>{9, 7}));
  config["eos_token_id"] = {9, "</s>"};
  try {
    ParseHfConfig(config.dump(), "/m/config.json");
    FAIL() << "a string eos_token_id was accepted";
  } catch (const HfConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "/m/config.json: eos_token_id: not an integer or a list of them");
  }
}

}  // namespace
}  // namespace headroom::hf
