// `headroom export`: a training checkpoint back into the Hugging Face directory layout the
// job started from, so the fine-tuned model can be served or loaded by transformers.
//
// Reads the checkpoint's manifest.json and rank files directly (the format in docs/design.md,
// "Checkpoints"; worker/checkpoint/checkpoint_manifest.h) rather than through the worker's
// reader, so the `headroom` binary needs no LibTorch. Each tensor of the source model's
// safetensors is taken from the checkpoint tensor "model." + its name (the worker's
// kModelTensorPrefix, worker/sharding/sharded_state_checkpoint.h), stored there as fp32
// master weights, and written back in the source's dtype (BF16 and F16 rounded to nearest
// even), shape and name. The output holds model.safetensors, or when the tensors exceed
// max_shard_bytes, model-0000K-of-0000N.safetensors + model.safetensors.index.json, as
// transformers' save_pretrained does; every other file of the source directory (config.json
// unchanged, generation_config.json, tokenizer files) is copied.
//
// Atomic and durable: everything is written into `<out>.partial` (removed first if a
// failed export left one), each file and the directory fsync'd, then renamed onto `<out>`
// and the parent fsync'd. A reader sees the previous export or the whole new one, never a
// mix; a failure leaves `<out>` as it was (and never touches the checkpoint). An existing
// `<out>` is replaced (swapped in one renameat2 where the filesystem can) when it is a model
// directory (it holds config.json) or empty; anything else is refused, so a mistyped --to
// cannot delete unrelated files.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace headroom::hf {

class ExportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ExportSummary {
  std::string step_dir;               // the checkpoint step exported
  std::string model_dir;              // the source Hugging Face directory
  std::vector<std::string> files;     // written into the output, by name
  int64_t tensors = 0;
  int64_t tensor_bytes = 0;
};

inline constexpr int64_t kDefaultMaxShardBytes = 5'000'000'000;  // save_pretrained's "5GB"

// Where a job with spec.model.path leaves its fine-tuned model when its last step is done:
// CHECKPOINT_DIR/hf-export/, beside the step directories, so it lives on the checkpoint
// volume wherever the job runs (a PVC on Kubernetes, WORKDIR/checkpoints under `headroom
// run`). Written by rank 0 after the final checkpoint, replaced by a later run's.
inline constexpr const char* kJobExportDirName = "hf-export";
std::string JobExportDir(const std::string& checkpoint_dir);

// `checkpoint`: a checkpoint root (its `latest` step is used) or one step directory.
// `model_dir`: the source Hugging Face directory; empty = the one the manifest records
// (extra.model_path). Throws ExportError (or SafetensorsError / HfConfigError from the
// source) naming the file and the tensor or field.
ExportSummary ExportCheckpoint(const std::string& checkpoint, const std::string& out_dir,
                               const std::string& model_dir = "", int64_t max_shard_bytes = kDefaultMaxShardBytes);

// fp32 -> bf16 / fp16 bits, rounding to nearest even (NaN stays NaN, overflow -> inf).
uint16_t Bf16FromFloat(float value);
uint16_t F16FromFloat(float value);

}  // namespace headroom::hf
