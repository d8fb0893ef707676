#include "core/protocol/step_record.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/protocol/model_fetch_record.h"

namespace headroom::protocol {

namespace {

// One list of (key, member) for both directions, so writing and reading cannot drift.
template <typename Record, typename Fn>
void ForEachField(Record& r, Fn&& fn) {
  fn("step", r.step);
  fn("reward_mean", r.reward_mean);
  fn("loss", r.loss);
  fn("kl", r.kl);
  fn("host_bytes", r.host_bytes);
  fn("host_peak_bytes", r.host_peak_bytes);
  fn("host_limit_bytes", r.host_limit_bytes);
  fn("gpu_allocated_bytes", r.gpu_allocated_bytes);
  fn("gpu_reserved_bytes", r.gpu_reserved_bytes);
  fn("gpu_peak_bytes", r.gpu_peak_bytes);
  fn("gpu_total_bytes", r.gpu_total_bytes);
  fn("tokens", r.tokens);
  fn("step_seconds", r.step_seconds);
  fn("tokens_per_second", r.tokens_per_second);
  fn("next_step_tokens", r.next_step_tokens);
  fn("micro_batch_tokens", r.micro_batch_tokens);
  fn("world_size", r.world_size);
  fn("rank", r.rank);
  fn("micro_batch_size", r.micro_batch_size);
  fn("exact_fraction", r.exact_fraction);
  fn("clip_fraction", r.clip_fraction);
  fn("grad_norm", r.grad_norm);
  fn("generated_tokens", r.generated_tokens);
  fn("gpu_alloc_retries", r.gpu_alloc_retries);
  fn("rollout_seconds", r.rollout_seconds);
  fn("update_seconds", r.update_seconds);
  fn("guard_action", r.guard_action);
  fn("host_forecast_steps", r.host_forecast_steps);
  fn("host_threshold_steps", r.host_threshold_steps);
  fn("host_growth_bytes_per_step", r.host_growth_bytes_per_step);
  fn("gpu_forecast_steps", r.gpu_forecast_steps);
  fn("gpu_threshold_steps", r.gpu_threshold_steps);
  fn("gpu_growth_bytes_per_step", r.gpu_growth_bytes_per_step);
  fn("checkpoint_bytes", r.checkpoint_bytes);
  fn("checkpoint_seconds", r.checkpoint_seconds);
  fn("epoch", r.epoch);
  fn("cursor", r.cursor);
  fn("prompts_filtered", r.prompts_filtered);
  fn("heldout_reward", r.heldout_reward);
  fn("heldout_problems", r.heldout_problems);
  fn("heldout_accuracy", r.heldout_accuracy);
  fn("heldout_accuracy_before", r.heldout_accuracy_before);
  fn("heldout_problems_before", r.heldout_problems_before);
}

// The answer lists, outside ForEachField: every field there is a number or a string.
nlohmann::ordered_json AnswersJson(const std::vector<HeldOutAnswer>& answers) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const HeldOutAnswer& a : answers) {
    out.push_back({{"question", a.question}, {"response", a.response}, {"correct", a.correct}});
  }
  return out;
}

// Entries that are not objects, and fields of the wrong type, are skipped: the reading
// contract keeps a record readable whatever a newer worker adds.
std::vector<HeldOutAnswer> AnswersFromJson(const nlohmann::json& j, const char* key) {
  std::vector<HeldOutAnswer> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const nlohmann::json& e : *it) {
    if (!e.is_object()) continue;
    HeldOutAnswer a;
    if (auto q = e.find("question"); q != e.end() && q->is_string()) a.question = q->get<std::string>();
    if (auto r = e.find("response"); r != e.end() && r->is_string()) a.response = r->get<std::string>();
    if (auto c = e.find("correct"); c != e.end() && c->is_boolean()) a.correct = c->get<bool>();
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

std::string StepRecord::ToJson() const {
  nlohmann::ordered_json j;
  ForEachField(*this, [&](const char* key, const auto& value) { j[key] = value; });
  if (!heldout_answers.empty()) j["heldout_answers"] = AnswersJson(heldout_answers);
  if (!heldout_answers_before.empty()) j["heldout_answers_before"] = AnswersJson(heldout_answers_before);
  // A response is the model's text: whatever bytes it decoded to, never a failed record.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::optional<StepRecord> ParseStepLogLine(const std::string& line, std::string* why) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    if (why) *why = "not JSON";
    return std::nullopt;
  }
  if (!j.is_object()) {
    if (why) *why = "not a JSON object";
    return std::nullopt;
  }
  auto step = j.find("step");
  if (step == j.end() || !step->is_number_integer()) {
    if (why) *why = "no integer \"step\"";
    return std::nullopt;
  }
  StepRecord r;
  ForEachField(r, [&](const char* key, auto& value) {
    auto it = j.find(key);
    if (it == j.end()) return;
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, std::string>) {
      if (it->is_string()) value = it->get<std::string>();
    } else {
      if (it->is_number()) value = it->get<T>();
    }
  });
  r.heldout_answers = AnswersFromJson(j, "heldout_answers");
  r.heldout_answers_before = AnswersFromJson(j, "heldout_answers_before");
  return r;
}

std::vector<StepRecord> ParseStepLog(const std::string& text, const std::string& source) {
  std::vector<StepRecord> out;
  std::istringstream in(text);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (ParseModelFetchLine(line)) continue;  // the model download before the first step
    std::string why;
    std::optional<StepRecord> r = ParseStepLogLine(line, &why);
    if (!r) throw std::runtime_error(source + ":" + std::to_string(number) + ": not a step record: " + why);
    out.push_back(std::move(*r));
  }
  return out;
}

std::vector<StepRecord> ReadStepLogFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  return ParseStepLog(text.str(), path);
}

bool LooksLikeStepLog(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{';
}

}  // namespace headroom::protocol
