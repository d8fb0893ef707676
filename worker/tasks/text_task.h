// A text task: problems read from a JSON Lines dataset (spec.task.dataset), each prompt
// rendered in the model's chat format (spec.task.prompt) and tokenized with the model's own
// tokenizer (ModelTokens, read once by the ModelSource: worker/model/model_source.h), each
// response decoded and scored by a text reward (spec.task.reward, worker/tasks/text_reward.h).
//
// Contract:
//   - Built once per rank from the spec and the model's tokens: every rank reads the same
//     files and so holds the same kept records in the same order.
//   - Every prompt is tokenized when the task is built. Records whose rendered prompt is
//     longer than spec.grpo.maxPromptLength tokens are dropped (counted in
//     prompts_filtered(), logged once): cutting a prompt would change the question.
//   - Make(g) is the record at DatasetOrder(kept records, task.seed).RecordAt(g): epoch
//     g / size visits every kept record once, in an order shuffled per epoch. The global
//     index g is a function of the step (grpo_trainer.h), so a resume on any world size
//     continues with the next unseen prompt.
//   - prompt_tokens() is the longest kept prompt: prompts vary in length and are padded on
//     the left by the trainer. answer_tokens() is spec.grpo.maxResponseLength: a text
//     answer's length is not known in advance.
//   - Stop and pad tokens: the model's (ModelTokens). Any token may be sampled (allowed is
//     empty).
//   - HeldOut(): spec.task.dataset.heldOut's records (same keys), rendered and tokenized
//     like the training prompts, in file order; those longer than maxPromptLength are
//     dropped (logged). Empty without a heldOut file.
//   - Score decodes the response up to its first stop token, special tokens skipped (ids
//     the tokenizer does not know, from a vocabulary padded past the tokenizer's, decode to
//     nothing), and returns ScoreTextAnswer(reward, text, the record's answer, formatWeight).
//
// Errors: a bad dataset or heldOut line, a prompt the tokenizer cannot encode, a reward or
// prompt format it does not know, no prompt left after filtering: std::invalid_argument
// naming the spec field and the file (and line), so the worker exits 2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/spec/training_job.h"
#include "worker/tasks/chat_prompt.h"
#include "worker/tasks/jsonl_dataset.h"
#include "worker/tasks/task.h"
#include "worker/tasks/text_reward.h"
#include "worker/model/model_tokens.h"
#include "worker/tokenizer/hf_tokenizer.h"

namespace headroom::worker {

class TextTask final : public Task {
 public:
  TextTask(const spec::TrainingJobSpec& spec, const ModelTokens& tokens);

  std::string name() const override { return "text"; }
  Problem Make(uint64_t global_index) const override;
  int64_t prompt_tokens() const override { return max_prompt_tokens_; }
  int64_t answer_tokens() const override { return max_response_tokens_; }
  ResponseFormat response_format() const override { return format_; }
  double Score(const Problem& problem, const int64_t* response, int64_t n) const override;
  // The reward without its format weight: the answer alone.
  bool Correct(const Problem& problem, const int64_t* response, int64_t n) const override;
  std::optional<DatasetState> DatasetAt(uint64_t global_index) const override;
  const std::vector<Problem>& HeldOut() const override { return held_out_; }

  int64_t prompts_filtered() const { return prompts_filtered_; }
  int64_t min_prompt_tokens() const { return min_prompt_tokens_; }  // the shortest kept prompt
  int64_t size() const { return dataset_.size(); }                  // kept records
  const HfTokenizer& tokenizer() const { return tokenizer_; }
  // The response text Score reads: ids up to the first stop token, specials skipped.
  std::string ResponseText(const int64_t* response, int64_t n) const override;

 private:
  void LoadHeldOut(const spec::TrainingJobSpec& spec, const PromptFormat& prompt_format, const std::string& bos_text);

  HfTokenizer tokenizer_;
  JsonlDataset dataset_;
  DatasetOrder order_;
  std::string content_hash_;                      // 16 hex digits
  std::vector<std::vector<int64_t>> prompt_ids_;  // per kept record, in dataset order
  int64_t max_prompt_tokens_ = 0;
  int64_t min_prompt_tokens_ = 0;
  int64_t max_response_tokens_ = 0;
  int64_t prompts_filtered_ = 0;
  ResponseFormat format_;
  std::vector<Problem> held_out_;
  TextReward reward_ = TextReward::kGsm8k;
  double format_weight_ = 0;
};

}  // namespace headroom::worker
