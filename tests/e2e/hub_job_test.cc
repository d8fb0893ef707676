// The example text job with its model named by a Hub reference instead of a path, under
// `headroom run`, against a local hub (tests/helpers/hub_test_server.h) that serves the
// example model's files and requires a token: HF_ENDPOINT points at it, HF_HUB_CACHE is a
// temporary directory, and the weights' download is cut short once. The run fetches the
// model into the standard cache layout, resumes the cut download with a Range request,
// shows the download in its view, trains, and writes the token nowhere (its output, its
// workdir, the cache).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "tests/helpers/hub_test_server.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::e2e {
namespace {
namespace fs = std::filesystem;
using headroom::testing::HubTestServer;

const std::string kBin = std::string(HEADROOM_BINARY_DIR) + "/bin";
const std::string kSource = HEADROOM_SOURCE_DIR;
const std::string kModel = kSource + "/configs/models/qwen2-tiny-addition";
const std::string kCommit = "5555555555666666666677777777778888888888";
const std::string kToken = "hf_E2eTokenThatMustNotLeak";

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// configs/addition-text-qwen2.yaml with a hub model, absolute dataset paths and two steps.
std::string HubJob() {
  std::string job = ReadAll(kSource + "/configs/addition-text-qwen2.yaml");
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = job.find(from);
    if (at != std::string::npos) job.replace(at, from.size(), to);
    return at != std::string::npos;
  };
  if (!replace("model: {path: configs/models/qwen2-tiny-addition}",
               "model: {hub: {repo: headroom-test/qwen2-tiny-addition}}") ||
      !replace("steps: 150", "steps: 2") || !replace("path: configs/data", "path: " + kSource + "/configs/data") ||
      !replace("heldOut: configs/data", "heldOut: " + kSource + "/configs/data")) {
    return "";
  }
  return job;
}

TEST(HubJobE2E, FetchesTheModelFromAHubResumingACutDownloadAndTrains) {
  for (const char* bin : {"headroom", "headroom-worker"}) {
    if (access((kBin + "/" + bin).c_str(), X_OK) != 0) GTEST_SKIP() << "no " << kBin << "/" << bin << " (build it)";
  }
  if (!fs::exists(kModel + "/model.safetensors")) GTEST_SKIP() << "no " << kModel << "/model.safetensors";
  const std::string job = HubJob();
  ASSERT_FALSE(job.empty()) << "configs/addition-text-qwen2.yaml no longer has the lines this test rewrites";
  HubTestServer server("headroom-test/qwen2-tiny-addition", kCommit, HubTestServer::FilesFrom(kModel));
  server.RequireToken(kToken);
  server.CutNextDownloadAfter(1000);
  headroom::testing::TempDir ws("headroom-e2e-hub");
  const fs::path cache = fs::path(ws.path()) / "hf-cache";
  const fs::path workdir = fs::path(ws.path()) / "run";
  std::ofstream(fs::path(ws.path()) / "job.yaml") << job;
  ::setenv("HF_ENDPOINT", server.endpoint().c_str(), 1);
  ::setenv("HF_HUB_CACHE", cache.c_str(), 1);
  ::setenv("HF_TOKEN", kToken.c_str(), 1);
  const std::string command = "'" + kBin + "/headroom' run '" + ws.path() + "/job.yaml' --workdir '" +
                              workdir.string() + "' > '" + ws.path() + "/output.txt' 2>&1";
  const int status = std::system(command.c_str());
  const std::string output = ReadAll(fs::path(ws.path()) / "output.txt");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;

  const fs::path repo = cache / "models--headroom-test--qwen2-tiny-addition";
  EXPECT_EQ(ReadAll(repo / "refs" / "main"), kCommit);
  for (const std::string name :
       {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"}) {
    const fs::path link = repo / "snapshots" / kCommit / name;
    ASSERT_TRUE(fs::is_symlink(link)) << link;
    EXPECT_EQ(fs::read_symlink(link).parent_path(), fs::path("../../blobs")) << link;
    EXPECT_EQ(ReadAll(link), ReadAll(fs::path(kModel) / name)) << name;
  }
  bool resumed = false;
  for (const auto& r : server.requests()) {
    resumed |= r.listener == "content" && r.range == "bytes=1000-";
    EXPECT_EQ(r.authorization, r.listener == "hub" ? "Bearer " + kToken : "") << r.listener << " " << r.path;
  }
  EXPECT_TRUE(resumed) << "the cut download was not resumed with a Range request";
  // The worker logs the download's progress into its own output file, and its model-fetch
  // lines into the step log, which `headroom run` shows (a pipe: plain lines).
  const std::string worker_output = ReadAll(workdir / "gen-0001" / "rank-0.out");
  EXPECT_NE(worker_output.find("fetched"), std::string::npos) << worker_output;
  EXPECT_NE(ReadAll(workdir / "gen-0001" / "rank-0.log")
                .find(R"({"model_fetch":{"repo":"headroom-test/qwen2-tiny-addition")"),
            std::string::npos);
  EXPECT_TRUE(std::regex_search(
      output, std::regex(R"(fetched model headroom-test/qwen2-tiny-addition@main: (\S+ \S+) of \1\n)")))
      << output;
  EXPECT_EQ(output.find(kToken), std::string::npos);
  for (const fs::path& dir : {workdir, cache}) {
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (entry.is_regular_file()) EXPECT_EQ(ReadAll(entry.path()).find(kToken), std::string::npos) << entry.path();
    }
  }
}

}  // namespace
}  // namespace headroom::e2e

namespace headroom::e2e {
namespace {

// A hostile repository against the real worker: its weight map names a file outside the
// cache. The worker refuses with exit 2 and one line naming the repository, the file and
// the bad name, in its output and its termination message; the victim is untouched.
TEST(HubJobE2E, AWeightMapNamingAFileOutsideTheCacheIsRefusedAndTouchesNothing) {
  if (access((kBin + "/headroom-worker").c_str(), X_OK) != 0) GTEST_SKIP() << "no " << kBin << "/headroom-worker";
  const std::string job = HubJob();
  ASSERT_FALSE(job.empty());
  headroom::testing::TempDir ws("headroom-e2e-hostile-hub");
  const fs::path victim = fs::path(ws.path()) / "victim.txt";
  std::ofstream(victim) << "victim\n";
  std::map<std::string, headroom::testing::HubTestFile> files = HubTestServer::FilesFrom(kModel);
  files.erase("model.safetensors");
  files["model.safetensors.index.json"] = {R"({"weight_map": {"lm_head.weight": ")" + victim.string() + R"("}})"};
  HubTestServer server("headroom-test/qwen2-tiny-addition", kCommit, files);
  std::ofstream(fs::path(ws.path()) / "job.yaml") << job;
  const std::string command = "HF_ENDPOINT='" + server.endpoint() + "' HF_HUB_CACHE='" + ws.path() +
                              "/hf-cache' HEADROOM_TERMINATION_LOG='" + ws.path() + "/termination.txt' '" + kBin +
                              "/headroom-worker' --job '" + ws.path() + "/job.yaml' --checkpoint-dir '" + ws.path() +
                              "/checkpoints' --metrics-port 0 > '" + ws.path() + "/output.txt' 2>&1";
  const int status = std::system(command.c_str());
  const std::string output = ReadAll(fs::path(ws.path()) / "output.txt");
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 2) << output;
  const std::string line = "spec.model.hub: headroom-test/qwen2-tiny-addition@main: model.safetensors.index.json: "
                           "weight_map names \"" +
                           victim.string() + "\", which is an absolute path";
  EXPECT_NE(output.find(line), std::string::npos) << output;
  EXPECT_NE(ReadAll(fs::path(ws.path()) / "termination.txt").find("weight_map names"), std::string::npos);
  EXPECT_FALSE(fs::is_symlink(victim));
  EXPECT_EQ(ReadAll(victim), "victim\n");
}

}  // namespace
}  // namespace headroom::e2e
