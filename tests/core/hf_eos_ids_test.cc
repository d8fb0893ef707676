// LoadEosTokenIds: which file wins, the forms eos_token_id takes, and the errors that name
// the file and the field.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/hf/eos_ids.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::hf {
namespace {

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(HfEosIds, GenerationConfigWinsOverConfig) {
  testing::TempDir dir;
  Write(dir.path() + "/config.json", R"({"eos_token_id": 7})");
  Write(dir.path() + "/generation_config.json", R"({"eos_token_id": [151645, 151643, 151645]})");
  EXPECT_EQ(LoadEosTokenIds(dir.path()), (std::vector<int64_t>{151645, 151643}));
}

TEST(HfEosIds, ConfigWhenGenerationConfigIsMissingOrSetsNone) {
  testing::TempDir dir;
  Write(dir.path() + "/config.json", R"({"eos_token_id": 7})");
  EXPECT_EQ(LoadEosTokenIds(dir.path()), (std::vector<int64_t>{7}));
  Write(dir.path() + "/generation_config.json", R"({"eos_token_id": null, "do_sample": true})");
  EXPECT_EQ(LoadEosTokenIds(dir.path()), (std::vector<int64_t>{7}));
}

TEST(HfEosIds, NoneDeclaredIsEmpty) {
  testing::TempDir dir;
  EXPECT_TRUE(LoadEosTokenIds(dir.path()).empty());
  Write(dir.path() + "/config.json", R"({"vocab_size": 32})");
  EXPECT_TRUE(LoadEosTokenIds(dir.path()).empty());
}

TEST(HfEosIds, MalformedFilesAreNamed) {
  testing::TempDir dir;
  Write(dir.path() + "/generation_config.json", R"({"eos_token_id": "</s>"})");
  try {
    LoadEosTokenIds(dir.path());
    FAIL() << "a string eos_token_id was accepted";
  } catch (const HfConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json: eos_token_id"), std::string::npos) << e.what();
  }
  Write(dir.path() + "/generation_config.json", "[1, 2");
  try {
    LoadEosTokenIds(dir.path());
    FAIL() << "malformed JSON was accepted";
  } catch (const HfConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json: not a JSON object"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headroom::hf
