// ToYaml / ToJson: the full object, defaults included, camelCase names, in the order
// docs/design.md lists the fields. The YAML is typed so that ParseTrainingJob reads back an
// equal job: strings that would read as numbers, booleans or null are quoted, and
// numbers are written in their shortest round-trip form.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/spec/document_tree.h"
#include "core/spec/training_job.h"

namespace headroom::spec {
namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json MetadataJson(const ObjectMeta& m) {
  ordered_json j = ordered_json::object();
  j["name"] = m.name;
  if (!m.namespace_.empty()) j["namespace"] = m.namespace_;
  if (!m.labels.empty()) j["labels"] = m.labels;
  if (!m.annotations.empty()) j["annotations"] = m.annotations;
  if (!m.uid.empty()) j["uid"] = m.uid;
  if (!m.resource_version.empty()) j["resourceVersion"] = m.resource_version;
  if (m.generation != 0) j["generation"] = m.generation;
  if (!m.creation_timestamp.empty()) j["creationTimestamp"] = m.creation_timestamp;
  if (!m.deletion_timestamp.empty()) j["deletionTimestamp"] = m.deletion_timestamp;
  return j;
}

ordered_json SpecJson(const TrainingJobSpec& s) {
  ordered_json j;
  j["suspend"] = s.suspend;
  j["workers"] = s.workers;
  j["minWorkers"] = s.min_workers;
  j["maxWorkers"] = s.max_workers;
  j["image"] = s.image;
  j["resources"] = {{"cpu", s.resources.cpu}, {"memory", s.resources.memory}, {"gpus", s.resources.gpus}};
  const ModelSpec& m = s.model;
  j["model"] = {{"preset", m.preset},       {"layers", m.layers},
                {"hidden", m.hidden},       {"heads", m.heads},
                {"ffnHidden", m.ffn_hidden}, {"maxSeqLen", m.max_seq_len},
                {"init", m.init},           {"initCheckpoint", m.init_checkpoint},
                {"seed", m.seed},           {"path", m.path}};
  if (!m.hub.repo.empty()) {
    j["model"]["hub"] = {{"repo", m.hub.repo}, {"revision", m.hub.revision}, {"endpoint", m.hub.endpoint}};
  }
  const TaskSpec& t = s.task;
  j["task"] = {{"name", t.name},
               {"digits", t.digits},
               {"seed", t.seed},
               {"dataset", {{"path", t.dataset.path},
                            {"promptKey", t.dataset.prompt_key},
                            {"answerKey", t.dataset.answer_key},
                            {"heldOut", t.dataset.held_out}}},
               {"prompt", {{"format", t.prompt.format},
                           {"system", t.prompt.system},
                           {"template", t.prompt.template_text}}},
               {"reward", {{"name", t.reward.name}, {"formatWeight", t.reward.format_weight}}}};
  const GrpoSpec& g = s.grpo;
  j["grpo"] = {{"steps", g.steps},
               {"promptsPerStep", g.prompts_per_step},
               {"groupSize", g.group_size},
               {"maxPromptLength", g.max_prompt_length},
               {"maxResponseLength", g.max_response_length},
               {"microBatchSize", g.micro_batch_size},
               {"updatesPerStep", g.updates_per_step},
               {"learningRate", g.learning_rate},
               {"clipLow", g.clip_low},
               {"clipHigh", g.clip_high},
               {"klCoef", g.kl_coef},
               {"lossAggregation", g.loss_aggregation},
               {"temperature", g.temperature}};
  j["sharding"] = {{"stage", s.sharding.stage},
                   {"offloadParams", s.sharding.offload_params},
                   {"offloadOptimizer", s.sharding.offload_optimizer}};
  j["checkpoint"] = {{"everySteps", s.checkpoint.every_steps},
                     {"keep", s.checkpoint.keep},
                     {"volume", s.checkpoint.volume}};
  const MemoryGuardSpec& mg = s.memory_guard;
  ordered_json actions = ordered_json::array();
  for (GuardAction a : mg.actions) actions.push_back(GuardActionName(a));
  j["memoryGuard"] = {{"enabled", mg.enabled},
                      {"hostThreshold", mg.host_threshold},
                      {"gpuThreshold", mg.gpu_threshold},
                      {"horizonSteps", mg.horizon_steps},
                      {"maxRestarts", mg.max_restarts},
                      {"actions", actions}};
  j["debug"] = {{"hostLeakBytesPerStep", s.debug.host_leak_bytes_per_step},
                {"gpuLeakBytesPerStep", s.debug.gpu_leak_bytes_per_step},
                {"hostLeakDecay", s.debug.host_leak_decay},
                {"hostJumpAtStep", s.debug.host_jump_at_step},
                {"hostJumpBytes", s.debug.host_jump_bytes}};
  if (!s.pod_template.empty()) j["template"] = PodTemplateJson(s.pod_template);
  return j;
}

ordered_json JobJson(const TrainingJob& job) {
  ordered_json j;
  j["apiVersion"] = job.api_version;
  j["kind"] = job.kind;
  j["metadata"] = MetadataJson(job.metadata);
  j["spec"] = SpecJson(job.spec);
  return j;
}

std::string ShortestDouble(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  // Shortest round-trip digits; plain decimals ("0.0003") unless exponents are much shorter.
  char fixed[400];
  char shortest[64];
  auto fixed_end = std::to_chars(fixed, fixed + sizeof(fixed), v, std::chars_format::fixed).ptr;
  auto shortest_end = std::to_chars(shortest, shortest + sizeof(shortest), v).ptr;
  std::string s = (fixed_end - fixed) <= (shortest_end - shortest) + 3 ? std::string(fixed, fixed_end)
                                                                       : std::string(shortest, shortest_end);
  // "1e-05" is a YAML 1.2 float already; make integral values read as floats too.
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// A string that a YAML reader would type as something else must be quoted.
bool NeedsQuotes(const std::string& s) {
  DocumentLoad probe = LoadYamlDocument("x: " + s);
  if (!probe.usable || probe.root.kind != DocumentNode::Kind::kMap) return true;
  const DocumentNode* value = probe.root.Find("x");
  return value == nullptr || value->kind != DocumentNode::Kind::kString || value->text != s;
}

void EmitYaml(YAML::Emitter& out, const ordered_json& j) {
  switch (j.type()) {
    case ordered_json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [key, value] : j.items()) {
        out << YAML::Key << key << YAML::Value;
        EmitYaml(out, value);
      }
      out << YAML::EndMap;
      break;
    case ordered_json::value_t::array:
      // Lists of scalars on one line; lists of maps (a template's env, volumes) as blocks.
      if (std::none_of(j.begin(), j.end(), [](const ordered_json& item) { return item.is_structured(); })) {
        out << YAML::Flow;
      }
      out << YAML::BeginSeq;
      for (const auto& item : j) EmitYaml(out, item);
      out << YAML::EndSeq;
      break;
    case ordered_json::value_t::string: {
      const std::string& s = j.get_ref<const std::string&>();
      if (s.empty() || NeedsQuotes(s)) {
        out << YAML::DoubleQuoted << s;
      } else {
        out << s;
      }
      break;
    }
    case ordered_json::value_t::boolean:
      out << (j.get<bool>() ? "true" : "false");
      break;
    case ordered_json::value_t::number_integer:
      out << j.get<int64_t>();
      break;
    case ordered_json::value_t::number_unsigned:
      out << j.get<uint64_t>();
      break;
    case ordered_json::value_t::number_float:
      out << ShortestDouble(j.get<double>());
      break;
    default:
      out << YAML::Null;
      break;
  }
}

}  // namespace

// A job built in code may hold bytes that are not UTF-8 (the parser refuses them): they
// become U+FFFD rather than an exception in the middle of a reconcile.
constexpr auto kReplaceInvalidUtf8 = nlohmann::json::error_handler_t::replace;

nlohmann::json ToJsonValue(const TrainingJob& job) {
  return nlohmann::json::parse(JobJson(job).dump(-1, ' ', false, kReplaceInvalidUtf8));
}

std::string ToJson(const TrainingJob& job, int indent) {
  return JobJson(job).dump(indent, ' ', false, kReplaceInvalidUtf8) + "\n";
}

std::string ToYaml(const TrainingJob& job) {
  YAML::Emitter out;
  EmitYaml(out, JobJson(job));
  return std::string(out.c_str()) + "\n";
}

}  // namespace headroom::spec
