#include <spdlog/spdlog.h>

#include "worker/train/final_export.h"

#include <chrono>
#include <exception>
#include <future>

#include "core/hf/hf_export.h"

namespace headroom::worker {
namespace {

enum ExportState : int64_t { kRunning = 0, kDone = 1, kFailed = 2 };

// Rank 0's state, broadcast to every rank.
int64_t Share(Communicator& comm, int64_t state) {
  torch::Tensor flag = torch::tensor({state}, torch::kInt64).to(comm.device());
  comm.broadcast(flag, 0);
  return flag.cpu().item<int64_t>();
}

}  // namespace

std::optional<std::string> ExportFinishedModel(const std::string& checkpoint_dir, const ModelSource& model,
                                               Communicator& comm, int64_t final_step) {
  if (!model.pretrained()) return std::nullopt;
  if (checkpoint_dir.empty()) {
    if (comm.rank() == 0) {
      spdlog::warn("no --checkpoint-dir: the fine-tuned model is not exported (the export is written from the final "
                   "checkpoint)");
    }
    return std::nullopt;
  }
  const std::string out = hf::JobExportDir(checkpoint_dir);
  if (comm.rank() != 0) {
    while (Share(comm, kRunning) == kRunning) {
    }
    return std::nullopt;
  }

  const auto start = std::chrono::steady_clock::now();
  // From `latest`, the step just saved: the export reads exactly what a resume would.
  auto job = std::async(std::launch::async, [&] { return hf::ExportCheckpoint(checkpoint_dir, out, model.dir()); });
  if (comm.world_size() > 1) {
    while (job.wait_for(std::chrono::seconds(1)) != std::future_status::ready) Share(comm, kRunning);
  }
  try {
    const hf::ExportSummary s = job.get();
    if (comm.world_size() > 1) Share(comm, kDone);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    spdlog::info("exported the fine-tuned model ({}, step {}: {} tensors, {} bytes) to {} in {:.3f} s", s.step_dir,
                 final_step, s.tensors, s.tensor_bytes, out, seconds);
    return out;
  } catch (const std::exception& e) {
    if (comm.world_size() > 1) Share(comm, kFailed);
    throw FinalExportError("exporting the fine-tuned model to " + out + " failed: " + e.what() +
                           "; the checkpoint in " + checkpoint_dir + " is kept (`headroom export " + checkpoint_dir +
                           " --to DIR` writes it)");
  }
}

}  // namespace headroom::worker
