// `headroom export CHECKPOINT_DIR --to DIR [--model SOURCE_DIR] [--merge]`: a Hugging Face
// directory from a checkpoint of a job that fine-tuned one (core/hf/hf_export.h): the
// source's config.json unchanged, its tensors in their own names, dtypes and shapes
// (sharded with an index above 5 GB), its generation and tokenizer files copied. A LoRA
// job's checkpoint is written as a PEFT adapter directory, or with --merge as the full
// model with the adapters folded into its weights.
//
//   exit 0: written (one line: what went where)
//   exit 2: the checkpoint or the source model cannot be used (the file and the tensor or
//           field named: a file failing its checksum, a missing tensor), or --to names a
//           directory the export does not own (the source model, a directory with files
//           it did not write); 1 anything else (I/O)
#include <iostream>
#include <memory>
#include <string>

#include "core/hf/hf_config.h"
#include "core/hf/hf_export.h"
#include "core/hf/safetensors.h"
#include "core/protocol/exit_codes.h"
#include "cli/command_registry.h"

namespace headroom::cli {
namespace {

struct ExportArgs {
  std::string checkpoint;
  std::string to;
  std::string model;
  bool merge = false;
};

int RunExport(const ExportArgs& args) {
  try {
    const hf::ExportSummary s =
        hf::ExportCheckpoint(args.checkpoint, args.to, args.model, hf::kDefaultMaxShardBytes, args.merge);
    std::cout << "exported " << s.step_dir << " (" << s.tensors << " tensors, " << s.tensor_bytes << " bytes, from "
              << s.model_dir << ") to " << args.to << ":";
    for (const std::string& f : s.files) std::cout << " " << f;
    std::cout << "\n";
    // Not trained, so not in the checkpoint (core/hf/hf_export.h says why each is right).
    for (const std::string& t : s.copied_from_source) std::cout << "  " << t << ": copied from the source unchanged\n";
    for (const std::string& t : s.tied_to_trained) std::cout << "  " << t << ": the trained embedding (tied head)\n";
    return protocol::kExitFinished;
  } catch (const hf::ExportError& e) {
    std::cerr << "headroom export: " << e.what() << "\n";
    return protocol::kExitInvalidSpec;
  } catch (const hf::SafetensorsError& e) {
    std::cerr << "headroom export: " << e.what() << "\n";
    return protocol::kExitInvalidSpec;
  } catch (const std::exception& e) {
    std::cerr << "headroom export: " << e.what() << "\n";
    return protocol::kExitFailure;
  }
}

const bool kRegistered = RegisterCommand(
    {"export", "Write a Hugging Face model directory from a checkpoint of a job that fine-tuned one",
     [](CLI::App& sub) -> std::function<int()> {
       auto args = std::make_shared<ExportArgs>();
       sub.add_option("CHECKPOINT_DIR", args->checkpoint, "a checkpoint directory (its latest step) or one step")
           ->required();
       sub.add_option("--to", args->to, "the Hugging Face directory to write")->required();
       sub.add_option("--model", args->model,
                      "the source Hugging Face directory (default: the one the checkpoint records, spec.model.path)");
       sub.add_flag("--merge", args->merge,
                    "a LoRA checkpoint: write the full model with W + scale * B A folded in, in the base's dtype "
                    "(default: the adapters in PEFT's format)");
       return [args] { return RunExport(*args); };
     }});

}  // namespace
}  // namespace headroom::cli
