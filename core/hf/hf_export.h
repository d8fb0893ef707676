// `headroom export`: a training checkpoint back into the Hugging Face directory layout the
// job started from, so the fine-tuned model can be served or loaded by transformers.
//
// Reads the checkpoint through core/checkpoint (the manifest, names and checksums the
// worker writes), so the `headroom` binary needs no LibTorch. Every file of the step is
// checked against its recorded size and sha256 first: a truncated or bit-flipped
// checkpoint is refused, naming the file. Each tensor of the source model's safetensors
// is taken from the checkpoint tensor "model." + its name, stored there as fp32 master
// weights, and written back in the source's dtype (BF16 and F16 rounded to nearest even),
// shape and name. Two kinds of source tensor are not trained and so not in the checkpoint:
// a rotary `...rotary_emb.inv_freq` buffer (computed from config.json; loading ignores it)
// is copied as it was, and the `lm_head.weight` of a model whose config ties the head to
// the embedding gets the trained embedding (the head the model computed with). The output
// therefore has exactly the source's tensors, so whatever loaded the source loads it. It
// holds model.safetensors, or when the tensors exceed max_shard_bytes,
// model-0000K-of-0000N.safetensors + model.safetensors.index.json, as transformers'
// save_pretrained does; every other file of the source directory (config.json unchanged,
// generation_config.json, tokenizer files) is copied; and .headroom-export.json lists what
// the export wrote.
//
// Writes only what it owns: `<out>` may be absent, empty, or an earlier export holding
// nothing but the files its marker lists. Anything else is refused before any work: a
// directory it did not write, one with a file it did not write (README.md, .git, ...),
// the source model's directory or one holding it, or one holding the checkpoint.
//
// Atomic and durable: everything is written into `<out>.partial` (removed first if a
// failed export left one), each file and the directory fsync'd, then published onto
// `<out>` (core/checkpoint/durable_file.h: a rename, or an atomic exchange with the
// earlier export). A reader sees the previous export or the whole new one, never a mix; a
// failure leaves `<out>` as it was (and never touches the checkpoint).
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

// The file in an export directory naming what the export wrote (JSON: "written_by",
// "checkpoint", "files"): the proof a later export may replace the directory.
inline constexpr const char* kExportMarkerFileName = ".headroom-export.json";

struct ExportSummary {
  std::string step_dir;                         // the checkpoint step exported
  std::string model_dir;                        // the source Hugging Face directory (absolute)
  std::vector<std::string> files;               // written into the output, by name (not the marker)
  std::vector<std::string> copied_from_source;  // untrained tensors copied as they were
  std::vector<std::string> tied_to_trained;     // untied heads written from the trained embedding
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
// (extra.model_path, absolute; a relative one from an older checkpoint is refused, asking
// for --model). Throws ExportError (or SafetensorsError / HfConfigError from the source)
// naming the file and the tensor or field; CheckpointError for an I/O failure.
//
// A LoRA checkpoint (manifest extra.lora: the adapters alone, on a frozen base) is written
// in PEFT's format: adapter_config.json (peft_type LORA, task_type CAUSAL_LM, r,
// lora_alpha, lora_dropout, target_modules, use_rslora, base_model_name_or_path, revision)
// and adapter_model.safetensors holding each adapter under PEFT's name,
// base_model.model.<parameter name> (lora_A.weight [r, in], lora_B.weight [out, r]), F32.
// With merge_lora it writes the full model instead: the source's tensors, each wrapped
// projection's weight W + scale B A (summed in fp32, written in the source's dtype), every
// other tensor the source's bytes, and the source's other files, as for a full fine-tune.
ExportSummary ExportCheckpoint(const std::string& checkpoint, const std::string& out_dir,
                               const std::string& model_dir = "", int64_t max_shard_bytes = kDefaultMaxShardBytes,
                               bool merge_lora = false);

// The names PEFT gives an adapter's tensors in adapter_model.safetensors.
inline constexpr const char* kPeftTensorPrefix = "base_model.model.";
inline constexpr const char* kPeftConfigFileName = "adapter_config.json";
inline constexpr const char* kPeftWeightsFileName = "adapter_model.safetensors";

// fp32 -> bf16 / fp16 bits, rounding to nearest even (NaN stays NaN, overflow -> inf).
uint16_t Bf16FromFloat(float value);
uint16_t F16FromFloat(float value);

}  // namespace headroom::hf
