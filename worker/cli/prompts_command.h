// headroom-worker's prompts command: how long a job's prompts are, in the model's tokens,
// as the worker's task makes them (the dataset's records in the prompt format and the
// model's tokenizer, or a generated task's fixed prompt). `headroom plan` asks it so the
// plan counts the prompts the data holds, not only the maxPromptLength bound (docs/design.md,
// "Commands" and the planner under "The memory guard").
//
//   headroom-worker prompts --job JOB.yaml
//       writes one JSON object on stdout:
//       {"task": NAME, "longest": N, "shortest": N, "max_prompt_length": N, "kept": N,
//        "skipped": N, "held_out_longest": N}
//       longest: the longest prompt the job runs, training or held-out (BOS included; both
//       go through the rollout's prefill in batches of a step's size); shortest: the
//       shortest training prompt; kept: the prompts the job trains on (1 for a generated
//       task: every prompt is as long); skipped: the dataset's records longer than
//       maxPromptLength, which the job leaves out; held_out_longest: 0 without held-out
//       problems.
//
// Reads no weights and no network: a spec.model.hub model must already be in the Hugging
// Face cache. Exit codes (core/protocol/exit_codes.h): 0; 2 when the spec, the model's
// config.json or tokenizer, or the dataset cannot be used (the file and field named on
// stderr); 1 anything else. Log lines go to stderr, never stdout.
#pragma once

#include <iosfwd>
#include <string>

namespace headroom::worker {

bool IsPromptsCommand(const std::string& command);

// argv[0] is `prompts`, then its options. Writes the result to `out` and errors to `err`;
// returns the exit code.
int RunPromptsCommand(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace headroom::worker
