// The example text job with its model directory and dataset on read-only mounts, as a
// cluster mounts them from their own claims (configs/cluster-addition-text-qwen2.yaml):
// the worker loads, trains, scores the held-out set and exports the fine-tuned model
// without writing a byte there. The read-only mounts are bind mounts in a private mount
// namespace (`unshare -m`), so nothing outside the test sees them; the test skips, saying
// why, where this machine allows no mount namespace, or without the binaries or weights.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/helpers/temp_dir.h"

namespace headroom::e2e {
namespace {

namespace fs = std::filesystem;

const std::string kBin = std::string(HEADROOM_BINARY_DIR) + "/bin";
const std::string kSource = HEADROOM_SOURCE_DIR;
const std::string kModel = kSource + "/configs/models/qwen2-tiny-addition";
const std::string kData = kSource + "/configs/data/addition-text";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// The shell text that mounts the model and the data read-only over themselves.
std::string ReadOnlyMounts() {
  return "mount --bind -o ro " + Quote(kModel) + " " + Quote(kModel) + " && mount --bind -o ro " + Quote(kData) + " " +
         Quote(kData);
}

std::string Unrunnable() {
  for (const char* bin : {"headroom", "headroom-worker"}) {
    if (access((kBin + "/" + bin).c_str(), X_OK) != 0) return "no " + kBin + "/" + bin + " (build it)";
  }
  if (!fs::exists(kModel + "/model.safetensors")) return "no " + kModel + "/model.safetensors";
  // The mounts must hold: a write through them must fail.
  const std::string probe =
      "unshare -m sh -c " + Quote(ReadOnlyMounts() + " && ! touch " + kModel + "/.probe") + " >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) return "no private mount namespace with read-only bind mounts here (unshare -m)";
  return "";
}

TEST(ReadOnlyModelE2E, TextJobTrainsAndExportsFromAReadOnlyModelAndDataset) {
  if (const std::string why = Unrunnable(); !why.empty()) GTEST_SKIP() << why;
  headroom::testing::TempDir dir("headroom-read-only-model");
  // The example job, short, with absolute paths to the mounted directories.
  std::string job = ReadAll(kSource + "/configs/addition-text-qwen2.yaml");
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"steps: 150", "steps: 4"},
                                 {"everySteps: 50", "everySteps: 2"},
                                 {"configs/models/", kSource + "/configs/models/"},
                                 {"configs/data/addition-text/train", kData + "/train"},
                                 {"configs/data/addition-text/heldout", kData + "/heldout"}}) {
    ASSERT_NE(job.find(from), std::string::npos) << from << " not in the example job";
    // Every occurrence: the job's comments name the same paths before its fields do.
    for (size_t at = job.find(from); at != std::string::npos; at = job.find(from, at + to.size())) {
      job.replace(at, from.size(), to);
    }
  }
  const std::string job_path = dir.path() + "/job.yaml";
  std::ofstream(job_path) << job;
  const std::string workdir = dir.path() + "/run";
  const std::string output = dir.path() + "/output.txt";
  const std::string run = ReadOnlyMounts() + " && exec " + Quote(kBin + "/headroom") + " run " + Quote(job_path) +
                          " --workdir " + Quote(workdir) + " --summary " + Quote(workdir + ".json");
  const int status = std::system(("unshare -m sh -c " + Quote(run) + " > " + Quote(output) + " 2>&1").c_str());
  ASSERT_EQ(status, 0) << ReadAll(output);

  const nlohmann::json summary = nlohmann::json::parse(ReadAll(workdir + ".json"));
  EXPECT_EQ(summary["steps"], 4) << ReadAll(output);
  EXPECT_TRUE(fs::exists(workdir + "/checkpoints/hf-export/config.json")) << ReadAll(output);
  EXPECT_NE(ReadAll(workdir + "/gen-0001/rank-0.out").find("held-out reward"), std::string::npos)
      << "the held-out set is read from the read-only dataset";
  EXPECT_FALSE(fs::exists(kModel + "/.probe"));
}

}  // namespace
}  // namespace headroom::e2e
