// config.json dimensions too large to be real are refused with the field named, before a
// model is built from them (a vocab_size of 2^40 ended in LibTorch's allocator); and a
// config.json that is a FIFO or larger than its limit is refused, not waited on or read.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/hf/hf_config.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::hf {
namespace {

nlohmann::json Qwen2() {
  return {{"architectures", {"Qwen2ForCausalLM"}},
          {"vocab_size", 96},
          {"hidden_size", 32},
          {"intermediate_size", 64},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2}};
}

std::string Refusal(const nlohmann::json& config) {
  try {
    ParseHfConfig(config.dump(), "/m/config.json");
  } catch (const HfConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(HfConfigBounds, AbsurdDimensionsAreRefusedNamingTheField) {
  EXPECT_EQ(Refusal(Qwen2()), "(accepted)");
  auto config = Qwen2();
  config["vocab_size"] = int64_t{1} << 40;
  EXPECT_EQ(Refusal(config), "/m/config.json: vocab_size: 1099511627776 is above 16777216, the largest headroom reads "
                             "(see hf_config.h)");
  for (const char* field : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"}) {
    config = Qwen2();
    config[field] = int64_t{1} << 33;
    EXPECT_EQ(Refusal(config).rfind(std::string("/m/config.json: ") + field + ": 8589934592 is above", 0), 0u)
        << Refusal(config);
  }
  config = Qwen2();
  config["head_dim"] = 1 << 20;
  EXPECT_EQ(Refusal(config).rfind("/m/config.json: head_dim: 1048576 is above 4096", 0), 0u) << Refusal(config);
  config = Qwen2();
  config["max_position_embeddings"] = int64_t{1} << 40;
  EXPECT_EQ(Refusal(config).rfind("/m/config.json: max_position_embeddings: must be in [1, 16777216]", 0), 0u)
      << Refusal(config);
}

TEST(HfConfigBounds, TheLargestPublishedShapesPassAndTheirProductIsBounded) {
  // Llama 3.1 405B: 126 layers of hidden 16384, FFN 53248, 128 heads (8 KV), 128K vocabulary.
  auto config = Qwen2();
  config["architectures"] = {"LlamaForCausalLM"};
  config.update({{"vocab_size", 128256},
                 {"hidden_size", 16384},
                 {"intermediate_size", 53248},
                 {"num_hidden_layers", 126},
                 {"num_attention_heads", 128},
                 {"num_key_value_heads", 8},
                 {"max_position_embeddings", 131072}});
  EXPECT_EQ(Refusal(config), "(accepted)");
  EXPECT_GT(ParseHfConfig(config.dump(), "c").ParameterCount(), 400'000'000'000);
  // Each dimension within its bound, the whole far beyond any model: refused as a whole.
  config.update({{"vocab_size", 1 << 24}, {"hidden_size", 1 << 17}, {"num_hidden_layers", 4096}});
  EXPECT_NE(Refusal(config).find("parameters, above the 2199023255552 headroom reads"), std::string::npos)
      << Refusal(config);
}

TEST(HfConfigFile, AFifoOrAnOversizedConfigIsRefused) {
  headroom::testing::TempDir dir;
  const std::string file = dir.path() + "/config.json";
  ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
  try {
    LoadHfConfig(dir.path());
    FAIL() << "a FIFO config.json was read";
  } catch (const HfConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(file + ": is a FIFO, expected a config.json", 0), 0u) << e.what();
  }
  ::unlink(file.c_str());
  std::ofstream(file) << Qwen2().dump();
  EXPECT_EQ(LoadHfConfig(dir.path()).vocab_size, 96);
  ASSERT_EQ(::truncate(file.c_str(), off_t{1} << 30), 0);  // sparse: 1 GiB
  try {
    LoadHfConfig(dir.path());
    FAIL() << "a 1 GiB config.json was read";
  } catch (const HfConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(file + ": 1 GiB is larger than the 16 MiB limit for a config.json", 0), 0u)
        << e.what();
  }
}

}  // namespace
}  // namespace headroom::hf
