// A spec.model.hub job is planned with the config.json of its cached snapshot (`headroom
// plan`, the guard and the supervisors' crash escalation go through guard::JobModelShape);
// without a cached snapshot the plan says it cannot, naming the cache and what is missing.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/guard/planner.h"
#include "core/hf/hf_config.h"
#include "core/spec/training_job.h"

namespace headroom::guard {
namespace {
namespace fs = std::filesystem;

const std::string kCommit = "fedcba9876543210fedcba9876543210fedcba98";

spec::TrainingJobSpec HubJob() {
  spec::TrainingJobSpec spec;
  spec.model.preset = "tiny";
  spec.model.hub.repo = "org/qwen2-fixture";
  spec.model.hub.revision = "main";
  spec.grpo.max_prompt_length = 16;
  spec.grpo.max_response_length = 512;
  return spec;
}

class HubModelShapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = fs::temp_directory_path() / ("hub_model_shape_test_" + std::to_string(::getpid()));
    fs::remove_all(cache_);
    ::setenv("HF_HUB_CACHE", cache_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("HF_HUB_CACHE");
    fs::remove_all(cache_);
  }
  // The qwen2 fixture laid out as huggingface_hub caches it.
  void CacheFixture() {
    const fs::path fixture = fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf/qwen2";
    const fs::path repo = cache_ / "models--org--qwen2-fixture";
    fs::create_directories(repo / "blobs");
    fs::create_directories(repo / "snapshots" / kCommit);
    fs::create_directories(repo / "refs");
    for (const std::string name : {"config.json", "model.safetensors"}) {
      fs::copy_file(fixture / name, repo / "blobs" / ("etag-" + name));
      fs::create_symlink(fs::path("../../blobs") / ("etag-" + name), repo / "snapshots" / kCommit / name);
    }
    std::ofstream(repo / "refs" / "main") << kCommit;
  }
  fs::path cache_;
};

TEST_F(HubModelShapeTest, PlansTheCachedSnapshotsConfig) {
  CacheFixture();
  const hf::HfModelConfig config =
      hf::LoadHfConfig((fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf/qwen2").string());
  const ModelShape shape = JobModelShape(HubJob());
  EXPECT_EQ(shape.parameters, config.ParameterCount());
  EXPECT_EQ(shape.hidden, config.hidden_size);
  EXPECT_NE(shape.parameters, PresetModelShape(HubJob()).parameters) << "the test could not tell the two apart";
}

TEST_F(HubModelShapeTest, WithoutACachedSnapshotSaysWhatIsMissing) {
  try {
    JobModelShape(HubJob());
    FAIL() << "planned a hub model that is not cached";
  } catch (const hf::HfConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("org/qwen2-fixture@main is not in the Hugging Face cache " + cache_.string()),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("refs/main"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace headroom::guard
