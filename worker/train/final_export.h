// A job that fine-tunes a Hugging Face model (ModelSource::pretrained()) hands it back in
// that format when its last step is done: rank 0 exports the final checkpoint into
// CHECKPOINT_DIR/hf-export/ (core/hf/hf_export.h: the names, dtypes, shapes, config and
// tokenizer files of the source's directory; written atomically and durably).
//
// Contract: collective; every rank calls it after the final checkpoint is on disk (every
// rank has returned from its save). The other ranks wait until rank 0 is done, in short
// broadcasts (so no collective timeout runs out however long a large model takes): a
// supervisor stops the ranks still running soon after the first one exits cleanly, and
// that must not be rank 0 in the middle of its export. A run without a checkpoint
// directory, or on a preset model, exports nothing. On rank 0 a failure throws
// FinalExportError naming what failed; the checkpoint is left as it was (the export only
// reads it), so a restart of the worker (which resumes at the last step and exports
// again) or `headroom export` can still write the model.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "worker/comm/communicator.h"
#include "worker/model/model_source.h"

namespace headroom::worker {

class FinalExportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Returns the directory written (on rank 0), or nullopt when this rank or job wrote none.
std::optional<std::string> ExportFinishedModel(const std::string& checkpoint_dir, const ModelSource& model,
                                               Communicator& comm, int64_t final_step);

}  // namespace headroom::worker
