// The example real job's parts on a GPU, through the real headroom-worker binary: the tiny
// Qwen2 directory with its BPE tokenizer, the addition-text dataset in chatml prompts of
// different lengths (left-padded, masked, bf16), ZeRO-3, sampled rollouts, chunked
// log-probs, a checkpoint, the held-out set and the export at the end. Every step's memory
// comes from the CUDA allocator. Skips without a CUDA device.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/protocol/step_record.h"
#include "core/files/remove_tree.h"

namespace headroom {
namespace {
namespace fs = std::filesystem;

// A scratch directory removed through files::RemoveTree: a CUDA PyTorch's libtorch.so
// exports its own std::filesystem::remove_all, which the loader may bind calls to (and
// which crashed there), so nothing in a GPU test calls it.
class Scratch {
 public:
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "headroom-cuda-text-job-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~Scratch() {
    std::error_code ignored;
    files::RemoveTree(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CudaTextJob, TheExampleTextJobTrainsOnTheGpuAndHandsBackItsModel) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible to LibTorch here";
  const std::string configs = std::string(HEADROOM_SOURCE_DIR) + "/configs";
  Scratch dir;
  const std::string job = dir.path() + "/job.yaml";
  const int steps = 6;
  std::ofstream(job) << "apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: cuda-text}\n"
                        "spec:\n  workers: 1\n  resources: {cpu: \"2\", memory: 8Gi, gpus: 1}\n"
                        "  model: {path: "
                     << configs
                     << "/models/qwen2-tiny-addition}\n"
                        "  task:\n    seed: 1\n    dataset: {path: "
                     << configs << "/data/addition-text/train.jsonl, heldOut: " << configs
                     << "/data/addition-text/heldout.jsonl}\n"
                        "    prompt: {format: chatml}\n    reward: {name: gsm8k, formatWeight: 0.5}\n"
                        "  grpo: {steps: "
                     << steps
                     << ", promptsPerStep: 16, groupSize: 8, maxPromptLength: 64,"
                        " maxResponseLength: 8, microBatchSize: 32, learningRate: 0.002, klCoef: 0.01}\n"
                        "  sharding: {stage: 3}\n  checkpoint: {everySteps: 3, keep: 2}\n"
                        "  memoryGuard: {enabled: true}\n";
  const std::string ckpt = dir.path() + "/ckpt", log = dir.path() + "/steps.jsonl", err = dir.path() + "/stderr";
  const std::string cmd = "RANK=0 WORLD_SIZE=1 " + std::string(HEADROOM_BINARY_DIR) + "/bin/headroom-worker --job " +
                          job + " --checkpoint-dir " + ckpt + " --metrics-port -1 --log " + log + " 2> " + err;
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadAll(err);
  EXPECT_NE(ReadAll(err).find("on cuda"), std::string::npos) << "the worker did not run on the GPU:\n" << ReadAll(err);

  const std::vector<protocol::StepRecord> records = protocol::ParseStepLog(ReadAll(log), log);
  ASSERT_EQ(records.size(), static_cast<size_t>(steps));
  for (const auto& r : records) {
    EXPECT_TRUE(std::isfinite(r.loss) && std::isfinite(r.kl) && std::isfinite(r.grad_norm)) << "step " << r.step;
    EXPECT_GT(r.gpu_total_bytes, 0) << "step " << r.step;
    EXPECT_GT(r.gpu_peak_bytes, 0) << "step " << r.step;
    EXPECT_EQ(r.heldout_problems, r.step % 3 == 0 ? 200 : 0) << "step " << r.step;
  }
  EXPECT_TRUE(fs::exists(ckpt + "/hf-export/model.safetensors"));
  EXPECT_EQ(ReadAll(ckpt + "/hf-export/tokenizer.json"),
            ReadAll(configs + "/models/qwen2-tiny-addition/tokenizer.json"));
}

}  // namespace
}  // namespace headroom
