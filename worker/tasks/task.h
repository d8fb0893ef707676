// A task: where a step's prompts come from, how responses stop and are padded, and how
// they are scored. Two kinds implement it, chosen once from the spec (task_factory.h):
//   - generated tasks (MakeTask below; task.cc): prompts made from (seed, global prompt
//     index), answers checked exactly; nothing is read from disk, and the same index gives
//     the same problem on every rank. Formats (one prompt length per task):
//       addition  "A+B="  A, B uniform in [0, 10^digits), written with exactly `digits`
//                         digits (leading zeros kept); answer: A+B with digits+1 digits.
//                         e.g. digits=3: "007+120=" -> "0127"
//       reverse   "D>"    D: `digits` uniform digits; answer: D reversed.   "120>" -> "021"
//       sort      "D>"    D: `digits` uniform digits; answer: D sorted.     "302>" -> "023"
//     Token form: BOS + prompt characters; the expected response is answer characters + EOS.
//   - text tasks (text_task.h): problems from a JSON Lines dataset visited in a seeded
//     order, rendered in a chat format and tokenized with the model's tokenizer, scored by
//     a text reward; prompts vary in length and are left-padded.
// The names and token counts are core's (core/spec/task_shapes.h), which the spec checks
// maxPromptLength and maxResponseLength against.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "worker/tasks/response_format.h"

namespace headroom::worker {

// Where a global prompt index falls in a dataset-backed task's dataset: what a checkpoint
// records (a resume refuses other contents) and the step log shows.
struct DatasetState {
  std::string path;              // the dataset file, as the spec names it
  std::string content_hash;      // 16 hex digits over the kept records (JsonlDataset::content_hash)
  int64_t prompts_filtered = 0;  // records dropped: prompt longer than maxPromptLength
  int64_t epoch = 0;             // full passes over the dataset before this index
  int64_t cursor = 0;            // this index's position in its epoch's order
};

struct Problem {
  std::string prompt;                  // e.g. "120>"
  std::string answer;                  // e.g. "021"
  std::vector<int64_t> prompt_tokens;  // BOS + prompt
};

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  // Deterministic in (task seed, global_index): the problem for that prompt slot.
  virtual Problem Make(uint64_t global_index) const = 0;
  // The most tokens a prompt may have (BOS included; prompts of one step may be shorter
  // and are left-padded to their longest) and the token count of a correct response (EOS
  // included).
  virtual int64_t prompt_tokens() const = 0;
  virtual int64_t answer_tokens() const = 0;
  virtual ResponseFormat response_format() const = 0;
  // The reward of one response to `problem`: `response` points at n generated ids, PAD
  // after the stop token ignored. In [0, 1]; 1 for a correct answer.
  virtual double Score(const Problem& problem, const int64_t* response, int64_t n) const = 0;
  // Whether the response's answer is right, whatever the reward pays for its form: what
  // held-out accuracy counts. By default a reward of 1.
  virtual bool Correct(const Problem& problem, const int64_t* response, int64_t n) const {
    return Score(problem, response, n) == 1.0;
  }
  // The response as text, for people (held-out answers in the step log); "" for tasks
  // that have no text form of their own.
  virtual std::string ResponseText(const int64_t* /*response*/, int64_t /*n*/) const { return ""; }
  // Dataset-backed tasks: the dataset and where `global_index` falls in it. Generated
  // tasks have no dataset: nullopt.
  virtual std::optional<DatasetState> DatasetAt(uint64_t /*global_index*/) const { return std::nullopt; }
  // Problems kept aside to measure the policy on and never trained on, in file order
  // (text tasks: spec.task.dataset.heldOut); empty when the task has none.
  virtual const std::vector<Problem>& HeldOut() const {
    static const std::vector<Problem> none;
    return none;
  }
};

// name: addition | reverse | sort; digits >= 1. Throws std::invalid_argument otherwise.
std::unique_ptr<Task> MakeTask(const std::string& name, int digits, uint64_t seed);

}  // namespace headroom::worker
