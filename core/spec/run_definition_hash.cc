// RunDefinitionHash: FNV-1a 64 over canonical JSON (sorted keys, no spaces, shortest
// round-trip numbers) of what defines the run. Self-contained on purpose: core links no
// crypto library, and this is an identity check against accidents, not an adversary.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/spec/training_job.h"

namespace headroom::spec {
namespace {

uint64_t Fnv1a64(const std::string& bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

std::string RunDefinitionHash(const TrainingJobSpec& spec) {
  TrainingJob job;
  job.spec = spec;
  ApplyDefaults(job);  // an unset field and its default define the same run
  const nlohmann::json full = ToJsonValue(job);
  nlohmann::json grpo = full["spec"]["grpo"];
  grpo.erase("microBatchSize");           // the guard may shrink it; the math is unchanged
  grpo.erase("maxTokensPerMicroBatch");   // the same: a memory lever, the loss does not depend on it
  grpo.erase("activationCheckpointing");  // a memory lever: the same gradients
  // Only the fields the task reads: a generated task ignores dataset, prompt and reward
  // (so its hash is what it was before text tasks existed, and its checkpoints resume),
  // a text task ignores name and digits.
  nlohmann::json task = full["spec"]["task"];
  if (job.spec.task.is_text()) {
    task.erase("name");
    task.erase("digits");
  } else {
    task.erase("dataset");
    task.erase("prompt");
    task.erase("reward");
  }
  // A Hub model is defined by its repository and revision; the worker resolves it to a
  // snapshot directory whose path depends on where the cache is, so that path is no part
  // of the run (a resume with another HF_HUB_CACHE continues the same run).
  nlohmann::json model = full["spec"]["model"];
  if (!job.spec.model.hub.repo.empty()) model.erase("path");
  const nlohmann::json canonical = {
      {"version", kApiVersion},
      {"model", model},
      {"task", task},
      {"grpo", grpo},
  };
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(Fnv1a64(canonical.dump())));
  return hex;
}

}  // namespace headroom::spec
