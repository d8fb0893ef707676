// The run's checkpoints, owned in one place: resume from DIR/latest, save on the spec's
// cadence (every checkpoint.everySteps finished steps, and after the last one), save at a
// stop boundary, and keep the newest checkpoint.keep (the writer prunes after each
// commit). The step loop only says which step just finished; the checkpointer decides
// whether that is a save, as torchtitan's CheckpointManager does with _should_save.
//
// Steps count finished steps: a checkpoint of step N holds the state after N steps, and
// the run goes on with step N + 1 (data is keyed by step, so the step is the whole data
// cursor; a text task's manifest `extra.dataset` also records the dataset's content hash,
// epoch and cursor, and a resume on other contents is refused; `extra.heldout_before`, the
// starting model's held-out score, so a resumed run still knows where the job began).
// Every save is a collective: all ranks call it with the same step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/spec/training_job.h"
#include "worker/checkpoint/checkpoint_writer.h"
#include "worker/comm/communicator.h"
#include "worker/train/grpo_trainer.h"

namespace headroom::worker {

// The checkpoint directory cannot be resumed from and retrying cannot help: the worker
// exits 2. Thrown as such when every saved step is damaged (each named).
class CheckpointUnusable : public CheckpointError {
 public:
  using CheckpointError::CheckpointError;
};

// The checkpoint directory holds another run's checkpoint (its run-definition hash
// differs, or its dataset's contents do).
class CheckpointOfAnotherRun : public CheckpointUnusable {
 public:
  using CheckpointUnusable::CheckpointUnusable;
};

// A save the storage refused (no space, a quota, a read-only filesystem) and refused the
// same way again on the one retry: retraining and saving again would fail the same way, so
// the worker exits 2 and the job stops (docs/design.md, "Worker exit codes").
class CheckpointStorageRefused : public CheckpointUnusable {
 public:
  using CheckpointUnusable::CheckpointUnusable;
};

class Checkpointer {
 public:
  // dir "" = no checkpoints: Resume() starts fresh and nothing is saved.
  Checkpointer(std::string dir, const spec::TrainingJobSpec& spec, Communicator& comm, int rank, GrpoTrainer& trainer);

  // Loads the newest intact step (worker/checkpoint/intact_checkpoint.h: `latest`'s, or
  // an older one when that fails its checksums) into the trainer (and this rank's RNG
  // state) when there is one. Returns the finished steps it holds (0: a fresh start).
  // Collective. Throws CheckpointOfAnotherRun, or CheckpointUnusable when no step is
  // intact. Called once, before any save.
  int64_t Resume();

  // After finished step `done`: saves when the cadence says so.
  std::optional<CheckpointSaveStats> AfterStep(int64_t done);
  // Saves `done` now unless it is already on disk (a stop at a step boundary). A save the
  // storage refuses (ENOSPC, EDQUOT, EROFS on any rank) is tried once more after a pause
  // (space may have been freed), with nothing retrained; refused the same way again, it
  // throws CheckpointStorageRefused. Other failures throw CheckpointError at once.
  std::optional<CheckpointSaveStats> Save(int64_t done);
  bool ShouldSave(int64_t done) const;

  // The starting model's held-out score (measured before a fresh run's first step): saved
  // in every checkpoint from now on, and read back by Resume().
  void RememberStartingHeldOut(const HeldOutScore& score) { starting_held_out_ = score; }
  const std::optional<HeldOutScore>& starting_held_out() const { return starting_held_out_; }

 private:
  // Throws CheckpointOfAnotherRun when the checkpoint (manifest `extra`) was trained on
  // other dataset contents than the task read now.
  void RequireSameDataset(const nlohmann::json& extra, const std::string& where) const;

  std::string dir_;
  const spec::TrainingJobSpec& spec_;
  Communicator& comm_;
  int rank_;
  GrpoTrainer& trainer_;
  std::string spec_hash_;
  std::optional<CheckpointWriter> writer_;
  int64_t saved_step_ = 0;  // the newest step on disk (0: none worth keeping)
  std::optional<HeldOutScore> starting_held_out_;
};

}  // namespace headroom::worker
