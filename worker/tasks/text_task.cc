#include <spdlog/spdlog.h>

#include "worker/tasks/text_task.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <unordered_map>

namespace headroom::worker {
namespace {

std::string Hex16(uint64_t v) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(v));
  return hex;
}

JsonlDataset LoadDataset(const spec::DatasetSpec& d, const std::string& path, const char* field) {
  try {
    return JsonlDataset::Load(path, d.prompt_key, d.answer_key);
  } catch (const DatasetError& e) {
    throw std::invalid_argument(std::string(field) + ": " + e.what());
  }
}

PromptFormat PromptFormatFromSpec(const spec::PromptSpec& p) {
  const std::optional<PromptFormatKind> kind = ParsePromptFormatKind(p.format);
  if (!kind) throw std::invalid_argument("spec.task.prompt.format: unknown format \"" + p.format + "\"");
  PromptFormat format;
  format.kind = *kind;
  format.system = p.system;
  format.template_text = p.template_text;
  return format;
}

}  // namespace

TextTask::TextTask(const spec::TrainingJobSpec& spec, const ModelTokens& tokens)
    : tokenizer_(tokens.tokenizer),
      dataset_(LoadDataset(spec.task.dataset, spec.task.dataset.path, "spec.task.dataset.path")),
      order_(1, spec.task.seed),  // replaced once the kept records are known
      max_response_tokens_(spec.grpo.max_response_length) {
  const std::optional<TextReward> reward = ParseTextReward(spec.task.reward.name);
  if (!reward) throw std::invalid_argument("spec.task.reward.name: unknown reward \"" + spec.task.reward.name + "\"");
  reward_ = *reward;
  format_weight_ = spec.task.reward.format_weight;
  format_.stop_tokens = tokens.stop_tokens;
  format_.pad = tokens.pad;

  // Render and tokenize every prompt, keyed by its line (Filter keeps records, not indices).
  const PromptFormat prompt_format = PromptFormatFromSpec(spec.task.prompt);
  const std::string bos_text = tokenizer_.bos_token().value_or("");
  std::unordered_map<int64_t, std::vector<int64_t>> ids_by_line;
  int64_t longest_dropped = 0;
  int64_t shortest = std::numeric_limits<int64_t>::max();
  for (int64_t i = 0; i < dataset_.size(); ++i) {
    const DatasetRecord& r = dataset_[i];
    std::vector<int64_t> ids;
    try {
      ids = tokenizer_.Encode(RenderPrompt(prompt_format, r.prompt, bos_text));
    } catch (const TokenizerError& e) {
      throw std::invalid_argument("spec.task.dataset.path: " + dataset_.path() + ":" + std::to_string(r.line) +
                                  ": the prompt cannot be tokenized: " + e.what());
    }
    shortest = std::min<int64_t>(shortest, static_cast<int64_t>(ids.size()));
    ids_by_line[r.line] = std::move(ids);
  }
  const int64_t limit = spec.grpo.max_prompt_length;
  const int64_t total = dataset_.size();
  try {
    prompts_filtered_ = dataset_.Filter(
        [&](const DatasetRecord& r) {
      const int64_t n = static_cast<int64_t>(ids_by_line.at(r.line).size());
      if (n > limit) longest_dropped = std::max(longest_dropped, n);
      return n <= limit;
        },
        "spec.grpo.maxPromptLength (" + std::to_string(limit) + " tokens; the shortest prompt has " +
            std::to_string(shortest) + ")");
  } catch (const DatasetError& e) {
    throw std::invalid_argument(std::string("spec.task.dataset.path: ") + e.what());
  }
  if (prompts_filtered_ > 0) {
    spdlog::warn("{}: {} of {} prompts are longer than spec.grpo.maxPromptLength ({} tokens, longest {}) and are "
                 "skipped",
                 dataset_.path(), prompts_filtered_, total, limit, longest_dropped);
  }
  prompt_ids_.reserve(static_cast<size_t>(dataset_.size()));
  for (int64_t i = 0; i < dataset_.size(); ++i) {
    prompt_ids_.push_back(std::move(ids_by_line.at(dataset_[i].line)));
    max_prompt_tokens_ = std::max<int64_t>(max_prompt_tokens_, static_cast<int64_t>(prompt_ids_.back().size()));
  }
  min_prompt_tokens_ = max_prompt_tokens_;
  for (const auto& ids : prompt_ids_)
    min_prompt_tokens_ = std::min<int64_t>(min_prompt_tokens_, static_cast<int64_t>(ids.size()));
  order_ = DatasetOrder(dataset_.size(), spec.task.seed);
  if (!spec.task.dataset.held_out.empty()) LoadHeldOut(spec, prompt_format, bos_text);
  content_hash_ = Hex16(dataset_.content_hash());
  spdlog::info("{}: {} prompts ({} format, {} to {} tokens), reward {}", dataset_.path(), dataset_.size(),
               spec.task.prompt.format,
               std::min_element(prompt_ids_.begin(), prompt_ids_.end(),
                                [](const auto& a, const auto& b) { return a.size() < b.size(); })
                   ->size(),
               max_prompt_tokens_, spec.task.reward.name);
}

void TextTask::LoadHeldOut(const spec::TrainingJobSpec& spec, const PromptFormat& prompt_format,
                           const std::string& bos_text) {
  const char* field = "spec.task.dataset.heldOut";
  const JsonlDataset held = LoadDataset(spec.task.dataset, spec.task.dataset.held_out, field);
  int64_t dropped = 0;
  for (int64_t i = 0; i < held.size(); ++i) {
    const DatasetRecord& r = held[i];
    Problem p;
    p.prompt = r.prompt;
    p.answer = r.answer;
    try {
      p.prompt_tokens = tokenizer_.Encode(RenderPrompt(prompt_format, r.prompt, bos_text));
    } catch (const TokenizerError& e) {
      throw std::invalid_argument(std::string(field) + ": " + held.path() + ":" + std::to_string(r.line) +
                                  ": the prompt cannot be tokenized: " + e.what());
    }
    if (static_cast<int64_t>(p.prompt_tokens.size()) > spec.grpo.max_prompt_length) {
      ++dropped;
      continue;
    }
    held_out_.push_back(std::move(p));
  }
  if (held_out_.empty()) {
    throw std::invalid_argument(std::string(field) + ": " + held.path() + ": every one of its " +
                                std::to_string(held.size()) + " prompts is longer than spec.grpo.maxPromptLength (" +
                                std::to_string(spec.grpo.max_prompt_length) + " tokens)");
  }
  if (dropped > 0) {
    spdlog::warn("{}: {} of {} held-out prompts are longer than spec.grpo.maxPromptLength ({} tokens) and are "
                 "skipped",
                 held.path(), dropped, held.size(), spec.grpo.max_prompt_length);
  }
  spdlog::info("{}: {} held-out problems", held.path(), held_out_.size());
}

Problem TextTask::Make(uint64_t global_index) const {
  const int64_t i = order_.RecordAt(global_index);
  const DatasetRecord& r = dataset_[i];
  Problem p;
  p.prompt = r.prompt;
  p.answer = r.answer;
  p.prompt_tokens = prompt_ids_[static_cast<size_t>(i)];
  return p;
}

std::string TextTask::ResponseText(const int64_t* response, int64_t n) const {
  const auto& stops = format_.stop_tokens;
  std::vector<int64_t> ids;
  for (int64_t k = 0; k < n; ++k) {
    if (std::find(stops.begin(), stops.end(), response[k]) != stops.end()) break;
    if (response[k] >= 0 && response[k] < tokenizer_.vocab_size() && tokenizer_.TokenText(response[k])) {
      ids.push_back(response[k]);
    }
  }
  return tokenizer_.Decode(ids, /*skip_special=*/true);
}

double TextTask::Score(const Problem& problem, const int64_t* response, int64_t n) const {
  return ScoreTextAnswer(reward_, ResponseText(response, n), problem.answer, format_weight_);
}

bool TextTask::Correct(const Problem& problem, const int64_t* response, int64_t n) const {
  return ScoreTextAnswer(reward_, ResponseText(response, n), problem.answer, /*format_weight=*/0.0) == 1.0;
}

std::optional<DatasetState> TextTask::DatasetAt(uint64_t global_index) const {
  DatasetState s;
  s.path = dataset_.path();
  s.content_hash = content_hash_;
  s.prompts_filtered = prompts_filtered_;
  s.epoch = order_.Epoch(global_index);
  s.cursor = order_.Cursor(global_index);
  return s;
}

}  // namespace headroom::worker
