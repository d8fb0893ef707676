// Validate: ranges, enums, names and cross-field rules of a typed, defaulted job. Ranges
// and allowed names come from the field table (training_job_fields.h); the rules here are
// what a row cannot say alone. Each rule says why it exists where the reason is not obvious.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "core/files/bounded_line_reader.h"
#include "core/files/input_file.h"
#include "core/hf/hf_config.h"
#include "core/hf/hub_reference.h"
#include "core/spec/closest_name.h"
#include "core/spec/kubernetes_names.h"
#include "core/spec/lora_targets.h"
#include "core/spec/model_presets.h"
#include "core/spec/prompt_template.h"
#include "core/spec/quantity.h"
#include "core/spec/task_shapes.h"
#include "core/spec/training_job.h"
#include "core/spec/training_job_fields.h"

namespace headroom::spec {
namespace {

std::string Num(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}
std::string Num(int64_t v) { return std::to_string(v); }

std::string OneOf(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + (n.empty() ? "\"\"" : n);
  return out;
}

class Checker {
 public:
  std::vector<SpecError> errors;

  void Fail(const std::string& path, std::string message) { errors.push_back({path, std::move(message), 0, 0}); }
  void AtLeast(const std::string& path, int64_t value, int64_t min) {
    if (value < min) Fail(path, "must be >= " + Num(min) + ", got " + Num(value));
  }
  void Between(const std::string& path, int64_t value, int64_t min, int64_t max) {
    if (value < min || value > max) {
      Fail(path, "must be between " + Num(min) + " and " + Num(max) + ", got " + Num(value));
    }
  }
  void Enum(const std::string& path, const std::string& value, const std::vector<std::string>& allowed) {
    if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
    Fail(path, "unknown value \"" + value + "\"" + DidYouMean(value, allowed) + "; expected one of " + OneOf(allowed));
  }
  void Name(const std::string& path, const std::string& problem) {
    if (!problem.empty()) Fail(path, problem);
  }
};

int DecimalDigits(int64_t v) {
  int n = 1;
  while (v >= 10) v /= 10, ++n;
  return n;
}

void CheckMetadata(Checker& c, const TrainingJob& job) {
  if (job.api_version != kApiVersion) {
    c.Fail("apiVersion", std::string("must be ") + kApiVersion + ", got \"" + job.api_version + "\"");
  }
  if (job.kind != kKind) c.Fail("kind", std::string("must be ") + kKind + ", got \"" + job.kind + "\"");

  const ObjectMeta& m = job.metadata;
  if (m.name.empty()) {
    c.Fail("metadata.name", "required");
  } else if (std::string bad = CheckDns1035Label(m.name); !bad.empty()) {
    // DNS-1123 label for the object; starting with a letter because the headless Service
    // named after the job must be a DNS-1035 label.
    c.Fail("metadata.name", bad);
  } else {
    // Pod hostnames are <name>-worker-<rank> and must stay DNS labels (<= 63) for every
    // rank up to maxWorkers-1, since MASTER_ADDR resolves through them.
    const int64_t last_rank = std::max(job.spec.max_workers, job.spec.workers) - 1;
    const size_t suffix = std::string("-worker-").size() + DecimalDigits(std::max<int64_t>(last_rank, 0));
    if (m.name.size() + suffix > kDns1123LabelMaxLength) {
      c.Fail("metadata.name", "must be at most " + Num(static_cast<int64_t>(kDns1123LabelMaxLength - suffix)) +
                                  " characters so that pod names " + m.name.substr(0, 8) + "...-worker-" +
                                  Num(last_rank) + " stay within 63, got " + Num(static_cast<int64_t>(m.name.size())));
    }
  }
  if (!m.namespace_.empty()) c.Name("metadata.namespace", CheckDns1123Label(m.namespace_));
  for (const auto& [key, value] : m.labels) {
    const std::string path = "metadata.labels[" + key + "]";
    c.Name(path, CheckQualifiedName(key));
    c.Name(path, CheckLabelValue(value));
  }
  for (const auto& [key, value] : m.annotations) {
    c.Name("metadata.annotations[" + key + "]", CheckQualifiedName(key));
  }
  c.AtLeast("metadata.generation", m.generation, 0);
}

// The rules below are the hand-written overlay on the field table: each checks what one
// field's row cannot say alone (another field, a file, a name's syntax), and runs right
// after that field's row, so errors come out in the table's order. Ranges and allowed
// names are the table's (CheckFields).
struct Context {
  const TrainingJobSpec& s;
  const ValidateOptions& options;
};

void WorkersRule(Checker& c, const Context& x) {
  const TrainingJobSpec& s = x.s;
  if (s.workers >= 1 && s.min_workers >= 1 && s.min_workers > s.workers) {
    c.Fail("spec.minWorkers",
           "must be <= workers (" + Num(int64_t{s.workers}) + "), got " + Num(int64_t{s.min_workers}));
  }
  if (s.workers >= 1 && s.max_workers >= 1 && s.workers > s.max_workers) {
    c.Fail("spec.workers",
           "must be <= maxWorkers (" + Num(int64_t{s.max_workers}) + "), got " + Num(int64_t{s.workers}));
  }
}

// Pods hold whole groups of ranks (docs/design.md, "Ranks per pod"): no pod gets fewer.
void RanksPerPodRule(Checker& c, const Context& x) {
  const TrainingJobSpec& s = x.s;
  if (s.ranks_per_pod >= 1 && s.workers >= 1 && s.workers % s.ranks_per_pod != 0) {
    c.Fail("spec.workers", "must be a multiple of ranksPerPod (" + Num(int64_t{s.ranks_per_pod}) + "), got " +
                               Num(int64_t{s.workers}) + ": every pod runs ranksPerPod ranks");
  }
}

// A rank drives one device, cuda:LOCAL_RANK; several GPUs per rank in a pod of several
// ranks would leave all but one of each rank's idle.
void GpusPerRankRule(Checker& c, const Context& x) {
  const TrainingJobSpec& s = x.s;
  if (s.ranks_per_pod > 1 && s.resources.gpus > 1) {
    c.Fail("spec.resources.gpus", "must be 0 or 1 (a rank's GPUs) when ranksPerPod > 1 (" +
                                      Num(int64_t{s.ranks_per_pod}) + "), got " + Num(int64_t{s.resources.gpus}) +
                                      ": each pod requests ranksPerPod x gpus");
  }
}

void ImageRule(Checker& c, const Context& x) {
  const std::string& image = x.s.image;
  if (image.empty()) {
    c.Fail("spec.image", "required");
  } else if (std::any_of(image.begin(), image.end(), [](unsigned char ch) { return std::isspace(ch); })) {
    c.Fail("spec.image", "must not contain whitespace, got \"" + image + "\"");
  }
}

// A positive quantity `text` at `path`, whose value `parse` gives and ApplyDefaults stored
// in `parsed` (named `parsed_name`).
void CheckQuantity(Checker& c, const std::string& path, const std::string& text,
                   std::optional<int64_t> (*parse)(std::string_view, std::string*), int64_t parsed,
                   const char* parsed_name) {
  std::string why;
  if (std::optional<int64_t> value = parse(text, &why); !value) {
    c.Fail(path, "invalid quantity: " + why);
  } else if (*value <= 0) {
    c.Fail(path, "must be > 0, got \"" + text + "\"");
  } else if (*value != parsed) {
    c.Fail(path, "is \"" + text + "\" but " + parsed_name + " is " + Num(parsed) + " (run ApplyDefaults)");
  }
}

// Only the fields: whether the repository and revision exist is known to the hub, which
// `headroom validate` does not reach (the fetch before training reports that).
void CheckHubModel(Checker& c, const ModelSpec& m) {
  const HubModelSpec& h = m.hub;
  if (h.repo.empty()) {
    if (h.revision != HubModelSpec{}.revision || !h.endpoint.empty())
      c.Fail("spec.model.hub.repo", "required when spec.model.hub is set");
    return;
  }
  if (!m.path.empty()) c.Fail("spec.model.hub", "exclusive with spec.model.path: name the model one way");
  if (std::string why = hf::HubRepoIdProblem(h.repo); !why.empty())
    c.Fail("spec.model.hub.repo", why + ", got \"" + h.repo + "\"");
  if (std::string why = hf::HubRevisionProblem(h.revision); !why.empty()) {
    c.Fail("spec.model.hub.revision", why + ", got \"" + h.revision + "\"");
  }
  if (h.endpoint.empty()) return;
  if (std::string why = hf::HubEndpointProblem(h.endpoint); !why.empty()) c.Fail("spec.model.hub.endpoint", why);
}

// With a preset every dim is filled by ApplyDefaults; without one they are required.
// An unknown preset filled nothing: its dims are judged once the preset is fixed.
void Dim(Checker& c, const ModelSpec& m, const char* field, int value) {
  const bool preset_known = m.preset.empty() || FindModelPreset(m.preset).has_value();
  const std::string path = std::string("spec.model.") + field;
  if (!preset_known && value == 0) return;
  if (value == 0 && m.preset.empty()) {
    c.Fail(path, "required when preset is \"\" (explicit dims)");
  } else {
    c.AtLeast(path, value, 1);
  }
}

void FfnHiddenRule(Checker& c, const Context& x) {
  const ModelSpec& m = x.s.model;
  // ffnHidden defaults from hidden: when hidden is missing, that is the error to show.
  if (m.ffn_hidden != 0 || m.hidden > 0) c.AtLeast("spec.model.ffnHidden", m.ffn_hidden, 1);
  if (m.hidden >= 1 && m.heads >= 1 && m.hidden % m.heads != 0) {
    c.Fail("spec.model.heads", "must divide hidden (" + Num(int64_t{m.hidden}) + "), got " + Num(int64_t{m.heads}));
  }
}

void MaxSeqLenRule(Checker& c, const Context& x) {
  const int64_t sequence = int64_t{x.s.grpo.max_prompt_length} + x.s.grpo.max_response_length;
  if (x.s.model.max_seq_len < sequence) {
    c.Fail("spec.model.maxSeqLen", "must be >= maxPromptLength + maxResponseLength (" + Num(sequence) + "), got " +
                                       Num(int64_t{x.s.model.max_seq_len}));
  }
}

void InitCheckpointRule(Checker& c, const Context& x) {
  const ModelSpec& m = x.s.model;
  if (m.init == "checkpoint" && m.init_checkpoint.empty()) {
    c.Fail("spec.model.initCheckpoint", "required when init is checkpoint");
  }
  if (m.init == "random" && !m.init_checkpoint.empty()) {
    c.Fail("spec.model.initCheckpoint", "only used when init is checkpoint; init is random");
  }
}

void ModelPathRule(Checker& c, const Context& x) {
  const ModelSpec& m = x.s.model;
  if (m.path.empty() || !x.options.read_model_config) return;
  // Checked where it can be read (on the machine that runs `headroom validate` or the
  // worker); on a cluster the path may live on a volume only the pods mount.
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::path(m.path) / "config.json", ec)) {
    try {
      hf::LoadHfConfig(m.path);
    } catch (const hf::HfConfigError& e) {
      c.Fail("spec.model.path", e.what());
    }
  }
}

// The first record of a dataset file (`where` is "FILE:LINE: "): a JSON object with the
// keys the spec names.
void CheckFirstRecord(Checker& c, const std::string& field, const std::string& where, const std::string& line,
                      const DatasetSpec& ds) {
  nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (record.is_discarded()) {
    c.Fail(field, where + "not valid JSON");
  } else if (!record.is_object()) {
    c.Fail(field, where + "expected a JSON object per line, got " + record.type_name());
  } else {
    for (const std::string* key : {&ds.prompt_key, &ds.answer_key}) {
      if (key->empty() || record.contains(*key)) continue;
      std::string keys;
      for (const auto& [k, v] : record.items()) keys += (keys.empty() ? "" : ", ") + k;
      c.Fail(field, where + "no key \"" + *key + "\" (" + (key == &ds.prompt_key ? "promptKey" : "answerKey") +
                        "); the record has: " + (keys.empty() ? "no keys" : keys));
    }
  }
}

// A dataset file named by the spec, checked where it can be read (as spec.model.path is):
// on a cluster it may live on a volume only the pods mount, so a path that does not exist
// here is left to the worker. One that does must be a readable file whose first record
// has the keys the spec names, so a wrong key fails at validate, not minutes into a run.
void CheckDatasetFile(Checker& c, const std::string& field, const std::string& file, const DatasetSpec& ds) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return;
  if (std::filesystem::is_directory(file, ec)) {
    c.Fail(field, "is a directory, expected a .jsonl file: " + file);
    return;
  }
  try {  // a FIFO would block the open below
    files::RequireRegularFile(file, "a .jsonl file");
  } catch (const files::InputFileError& e) {
    c.Fail(field, e.what());
    return;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    c.Fail(field, "cannot read " + file + ": " + std::strerror(errno));
    return;
  }
  // Line by line within a bound: a first "line" of 1 GB is refused, not read whole.
  files::BoundedLineReader lines(in);
  std::string line;
  try {
    while (lines.Next(line)) {
      if (lines.line_number() == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // UTF-8 byte order mark
      if (line.find_first_not_of(" \t\r\n\f\v") == std::string::npos) continue;
      CheckFirstRecord(c, field, file + ":" + std::to_string(lines.line_number()) + ": ", line, ds);
      return;  // the first record; the worker reads the rest
    }
  } catch (const files::LineTooLongError& e) {
    c.Fail(field, file + ":" + std::to_string(e.line()) + ": " + e.what());
    return;
  } catch (const std::runtime_error& e) {
    c.Fail(field, "cannot read " + file + ": " + e.what());
    return;
  }
  c.Fail(field, file + " has no records (empty file)");
}

void DatasetRule(Checker& c, const Context& x) {
  const TaskSpec& t = x.s.task;
  const DatasetSpec& ds = t.dataset;
  if (ds.prompt_key.empty()) c.Fail("spec.task.dataset.promptKey", "must not be empty");
  if (ds.answer_key.empty()) c.Fail("spec.task.dataset.answerKey", "must not be empty");
  if (t.is_text()) {
    if (x.s.model.path.empty() && x.s.model.hub.repo.empty()) {
      c.Fail("spec.task.dataset.path", "requires spec.model.path or spec.model.hub: a text task's tokenizer (and chat "
                                       "special tokens) come from the model directory");
    }
    CheckDatasetFile(c, "spec.task.dataset.path", ds.path, ds);
  } else if (!ds.held_out.empty()) {
    c.Fail("spec.task.dataset.heldOut", "only used with spec.task.dataset.path (a text task)");
  }
  if (!ds.held_out.empty()) CheckDatasetFile(c, "spec.task.dataset.heldOut", ds.held_out, ds);
}

void PromptTemplateRule(Checker& c, const Context& x) {
  const PromptSpec& p = x.s.task.prompt;
  if (p.format == "template") {
    if (p.template_text.empty()) {
      c.Fail("spec.task.prompt.template", "required when format is template");
    } else if (std::string bad = CheckPromptTemplate(p.template_text); !bad.empty()) {
      c.Fail("spec.task.prompt.template", bad);
    }
  } else if (!p.template_text.empty()) {
    c.Fail("spec.task.prompt.template", "only used when format is template; format is " + p.format);
  }
}

void GrpoRule(Checker& c, const Context& x) {
  const TrainingJobSpec& s = x.s;
  const TaskSpec& t = s.task;
  const GrpoSpec& g = s.grpo;
  // The task's prompts and answers must fit, or the model never sees a whole problem (a
  // text task's lengths are known only once its dataset is tokenized: the worker checks).
  // task.name and digits are checked for a text task too, which does not read them: their
  // defaults always pass, and the CRD schema can hold the same rule.
  if (!t.is_text() && IsKnownTask(t.name) && t.digits >= 1 && t.digits <= 12) {
    const int prompt = PromptTokens(t.name, t.digits);
    if (g.max_prompt_length >= 1 && g.max_prompt_length < prompt) {
      c.Fail("spec.grpo.maxPromptLength", "must be >= " + Num(int64_t{prompt}) + " for " + t.name + " with " +
                                              Num(int64_t{t.digits}) + " digits (" + PromptExample(t.name, t.digits) +
                                              "), got " + Num(int64_t{g.max_prompt_length}));
    }
    const int answer = MaxAnswerTokens(t.name, t.digits);
    if (g.max_response_length >= 1 && g.max_response_length < answer) {
      c.Fail("spec.grpo.maxResponseLength", "must be >= " + Num(int64_t{answer}) + " for " + t.name + " with " +
                                                Num(int64_t{t.digits}) + " digits (the longest answer plus EOS), got " +
                                                Num(int64_t{g.max_response_length}));
    }
  }

  // A token budget below one whole sequence: the longest prompt with the longest response
  // would run over it alone (micro_batches.h lets such a row go alone; refused here so the
  // budget is the bound the planner counts).
  const int64_t sequence = int64_t{g.max_prompt_length} + g.max_response_length;
  if (g.max_tokens_per_micro_batch > 0 && g.max_tokens_per_micro_batch < sequence) {
    c.Fail("spec.grpo.maxTokensPerMicroBatch", "must be 0 (off) or >= maxPromptLength + maxResponseLength (" +
                                                   Num(int64_t{g.max_prompt_length}) + " + " +
                                                   Num(int64_t{g.max_response_length}) + " = " + Num(sequence) +
                                                   "), got " + Num(int64_t{g.max_tokens_per_micro_batch}));
  }

  // Each rollout batch is cut into updatesPerStep mini-batches whose prompts split evenly
  // over the ranks (see WorkerCountFits).
  if (g.prompts_per_step >= 1 && g.updates_per_step >= 1) {
    if (g.prompts_per_step % g.updates_per_step != 0) {
      c.Fail("spec.grpo.promptsPerStep", "must be divisible by updatesPerStep (" + Num(int64_t{g.updates_per_step}) +
                                             "), got " + Num(int64_t{g.prompts_per_step}));
    } else if (s.workers >= 1 && !WorkerCountFits(g, s.workers)) {
      const int per_update = g.prompts_per_step / g.updates_per_step;
      c.Fail("spec.workers",
             "must divide the prompts of each optimizer mini-batch (promptsPerStep / updatesPerStep = " +
                 Num(int64_t{per_update}) + "), got " + Num(int64_t{s.workers}));
    }
  }
}

void OffloadParamsRule(Checker& c, const Context& x) {
  const ShardingSpec& sh = x.s.sharding;
  if (sh.offload_params && sh.stage != 3) {
    // Offloading parameters needs them sharded and gathered per layer, which is stage 3.
    c.Fail("spec.sharding.offloadParams",
           "requires stage 3 (ZeRO-3 parameter offload), stage is " + Num(int64_t{sh.stage}));
  }
}

// The model's shape where it is known here: a preset's (or explicit dims), or
// spec.model.path's config.json where it can be read; nullopt for a Hub model or an
// unreadable path (the worker checks the same against the model it loads).
std::optional<hf::HfModelConfig> KnownModelConfig(const Context& x) {
  const ModelSpec& m = x.s.model;
  if (!m.hub.repo.empty()) return std::nullopt;
  if (m.path.empty()) {
    if (m.layers < 1 || m.hidden < 1 || m.heads < 1 || m.ffn_hidden < 1 || m.hidden % m.heads != 0) return std::nullopt;
    return PresetModelConfig(m);
  }
  std::error_code ec;
  if (!x.options.read_model_config || !std::filesystem::exists(std::filesystem::path(m.path) / "config.json", ec)) {
    return std::nullopt;
  }
  try {
    return hf::LoadHfConfig(m.path);
  } catch (const hf::HfConfigError&) {
    return std::nullopt;  // spec.model.path's own rule names the problem
  }
}

void LoraRule(Checker& c, const Context& x) {
  const LoraSpec& l = x.s.model.lora;
  if (!l.enabled()) {
    LoraSpec off = l;
    off.r = 0;
    if (!(off == LoraSpec{})) c.Fail("spec.model.lora.r", "must be > 0 when other spec.model.lora fields are set");
    return;
  }
  const auto& targets = l.target_modules;
  if (targets.size() > 1 && std::find(targets.begin(), targets.end(), kLoraAllLinear) != targets.end()) {
    c.Fail("spec.model.lora.targetModules", "all-linear names every projection: list it alone");
  }
  // Stage 3 shards the frozen base too and replays a block's dropout mask in its recompute
  // (worker/sharding/model_shards.h); activation checkpointing at stages 0-2 does not.
  if (l.dropout > 0 && x.s.grpo.activation_checkpointing && x.s.sharding.stage != 3) {
    c.Fail("spec.model.lora.dropout",
           "must be 0 with spec.grpo.activationCheckpointing at spec.sharding.stage 0-2: a block recomputed in "
           "backward would draw another dropout mask than its forward did (stage 3's recompute replays it)");
  }
  if (std::optional<hf::HfModelConfig> config = KnownModelConfig(x)) {
    const std::vector<std::string>& family = LoraModuleNames(config->architecture);
    const std::vector<std::string> known = LoraTargetNames();  // an unknown name is the row's error already
    for (size_t i = 0; i < targets.size(); ++i) {
      if (targets[i] == kLoraAllLinear) continue;
      if (std::find(known.begin(), known.end(), targets[i]) == known.end()) continue;
      if (std::find(family.begin(), family.end(), targets[i]) == family.end()) {
        c.Fail("spec.model.lora.targetModules[" + std::to_string(i) + "]",
               config->architecture_name + " has no module \"" + targets[i] + "\"; it has " + OneOf(family));
      }
    }
    for (const std::string& module : LoraTargets(l, config->architecture)) {
      const std::optional<LinearShape> shape = LoraModuleShape(*config, module);
      if (!shape) continue;
      const int64_t smaller = std::min(shape->in, shape->out);
      if (l.r > smaller) {
        c.Fail("spec.model.lora.r", "must be at most " + Num(smaller) + ", the smaller side of " + module + " [" +
                                        Num(shape->out) + " x " + Num(shape->in) + "], got " + Num(int64_t{l.r}));
        break;
      }
    }
  }
  std::error_code ec;
  if (!l.from.empty() && x.options.read_model_config && std::filesystem::is_directory(l.from, ec)) {
    if (std::string why = PeftAdapterConfigProblem(l.from, l); !why.empty()) c.Fail("spec.model.lora.from", why);
  }
}

void VolumeRule(Checker& c, const Context& x) {
  const std::string& volume = x.s.checkpoint.volume;
  if (volume.empty()) return;
  std::string bad = CheckDns1123Subdomain(volume);
  if (!bad.empty()) c.Fail("spec.checkpoint.volume", "must name a PersistentVolumeClaim: " + bad);
}

using Rule = void (*)(Checker&, const Context&);

// The overlay: the rules that run after the row at each path.
const std::map<std::string, std::vector<Rule>>& Rules() {
  static const std::map<std::string, std::vector<Rule>> rules = {
      {"spec.maxWorkers", {WorkersRule}},
      {"spec.ranksPerPod", {RanksPerPodRule}},
      {"spec.image", {ImageRule}},
      {"spec.resources.gpus", {GpusPerRankRule}},
      {"spec.model.layers", {[](Checker& c, const Context& x) { Dim(c, x.s.model, "layers", x.s.model.layers); }}},
      {"spec.model.hidden", {[](Checker& c, const Context& x) { Dim(c, x.s.model, "hidden", x.s.model.hidden); }}},
      {"spec.model.heads", {[](Checker& c, const Context& x) { Dim(c, x.s.model, "heads", x.s.model.heads); }}},
      {"spec.model.ffnHidden", {FfnHiddenRule}},
      {"spec.model.maxSeqLen", {MaxSeqLenRule}},
      {"spec.model.initCheckpoint", {InitCheckpointRule}},
      {"spec.model.path", {ModelPathRule}},
      {"spec.model.hub", {[](Checker& c, const Context& x) { CheckHubModel(c, x.s.model); }}},
      {"spec.model.lora", {LoraRule}},
      {"spec.task.dataset", {DatasetRule}},
      {"spec.task.prompt.template", {PromptTemplateRule}},
      {"spec.grpo", {GrpoRule}},
      {"spec.sharding.offloadParams", {OffloadParamsRule}},
      {"spec.checkpoint.volume", {VolumeRule}},
  };
  return rules;
}

// A number's range from its row, with the messages the validator has always used.
void CheckIntegerRange(Checker& c, const std::string& path, const FieldDef& f, int64_t value) {
  if (f.minimum && f.maximum) {
    c.Between(path, value, static_cast<int64_t>(*f.minimum), static_cast<int64_t>(*f.maximum));
  } else if (f.minimum) {
    c.AtLeast(path, value, static_cast<int64_t>(*f.minimum));
  } else if (f.maximum && value > *f.maximum) {
    c.Fail(path, "must be <= " + Num(static_cast<int64_t>(*f.maximum)) + ", got " + Num(value));
  }
}

void CheckDoubleRange(Checker& c, const std::string& path, const FieldDef& f, double v) {
  const bool above = !f.minimum || (f.exclusive_minimum ? v > *f.minimum : v >= *f.minimum);
  const bool below = !f.maximum || (f.exclusive_maximum ? v < *f.maximum : v <= *f.maximum);
  if (f.minimum && f.maximum) {
    if (!std::isfinite(v) || !above || !below) {
      c.Fail(path, std::string("must be in ") + (f.exclusive_minimum ? "(" : "[") + Num(*f.minimum) + ", " +
                       Num(*f.maximum) + (f.exclusive_maximum ? ")" : "]") + ", got " + Num(v));
    }
  } else if (!std::isfinite(v) && (f.minimum || f.maximum)) {
    c.Fail(path, "must be a finite number, got " + Num(v));
  } else if (!above) {
    c.Fail(path, std::string("must be ") + (f.exclusive_minimum ? "> " : ">= ") + Num(*f.minimum) + ", got " + Num(v));
  } else if (!below) {
    c.Fail(path, std::string("must be ") + (f.exclusive_maximum ? "< " : "<= ") + Num(*f.maximum) + ", got " + Num(v));
  }
}

void CheckActions(Checker& c, const std::string& path, const std::vector<GuardAction>& actions) {
  for (size_t i = 0; i < actions.size(); ++i) {
    const std::string item = path + "[" + std::to_string(i) + "]";
    const char* name = GuardActionName(actions[i]);
    if (std::string(name) == "unknown") {
      c.Fail(item, "unknown action");
      continue;
    }
    for (size_t j = 0; j < i; ++j) {
      if (actions[j] == actions[i]) {
        c.Fail(item, std::string("duplicate action \"") + name + "\" (already at [" + std::to_string(j) + "])");
        break;
      }
    }
  }
}

void CheckStrings(Checker& c, const std::string& path, const FieldDef& f, const std::vector<std::string>& items) {
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string item = path + "[" + std::to_string(i) + "]";
    if (f.names != nullptr) {
      const std::vector<std::string> allowed = f.names();
      if (std::find(allowed.begin(), allowed.end(), items[i]) == allowed.end()) {
        c.Enum(item, items[i], allowed);
        continue;
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (items[j] == items[i]) {
        c.Fail(item, "duplicate \"" + items[i] + "\" (already at [" + std::to_string(j) + "])");
        break;
      }
    }
  }
}

// Walks the rows of `object` (the struct they point into): each row's own check, then
// the overlay's rules for its path.
void CheckFields(Checker& c, const Context& x, const std::vector<FieldDef>& fields, void* object,
                 const std::string& parent) {
  for (const FieldDef& f : fields) {
    const std::string path = parent + "." + f.name;
    void* member = f.member(object);
    switch (f.kind) {
      case FieldKind::kInt:
        if (!f.range_in_crd_only) CheckIntegerRange(c, path, f, *static_cast<int*>(member));
        break;
      case FieldKind::kInt64:
      case FieldKind::kByteCount:
        if (!f.range_in_crd_only) CheckIntegerRange(c, path, f, *static_cast<int64_t*>(member));
        break;
      case FieldKind::kOptionalInt64:
        if (const auto& v = *static_cast<std::optional<int64_t>*>(member)) CheckIntegerRange(c, path, f, *v);
        break;
      case FieldKind::kDouble:
        if (!f.range_in_crd_only) CheckDoubleRange(c, path, f, *static_cast<double*>(member));
        break;
      case FieldKind::kString:
        if (f.names != nullptr) c.Enum(path, *static_cast<std::string*>(member), f.names());
        break;
      case FieldKind::kQuantity: {
        const std::string& text = *static_cast<std::string*>(member);
        const int64_t parsed = *static_cast<int64_t*>(f.parsed(object));
        CheckQuantity(c, path, text, f.unit == QuantityUnit::kMillis ? ParseQuantityMillis : ParseQuantityBytes, parsed,
                      f.parsed_name.c_str());
        break;
      }
      case FieldKind::kActions: CheckActions(c, path, *static_cast<std::vector<GuardAction>*>(member)); break;
      case FieldKind::kStrings: CheckStrings(c, path, f, *static_cast<std::vector<std::string>*>(member)); break;
      case FieldKind::kPodTemplate: CheckPodTemplate(*static_cast<PodTemplate*>(member), path, c.errors); break;
      case FieldKind::kObject: CheckFields(c, x, f.fields, member, path); break;
      case FieldKind::kBool:
      case FieldKind::kUint64:  // the parser refuses negatives; the whole range is valid
        break;
    }
    auto rules = Rules().find(path);
    if (rules == Rules().end()) continue;
    for (Rule rule : rules->second) rule(c, x);
  }
}

}  // namespace

bool WorkerCountFits(const GrpoSpec& grpo, int workers) {
  if (workers < 1 || grpo.updates_per_step < 1 || grpo.prompts_per_step < 1) return false;
  if (grpo.prompts_per_step % grpo.updates_per_step != 0) return false;
  return (grpo.prompts_per_step / grpo.updates_per_step) % workers == 0;
}

std::vector<SpecError> Validate(const TrainingJob& job, const ValidateOptions& options) {
  Checker c;
  CheckMetadata(c, job);
  // The walk only reads; the rows' accessors take a mutable struct.
  CheckFields(c, Context{job.spec, options}, SpecFields(), const_cast<TrainingJobSpec*>(&job.spec), "spec");
  return std::move(c.errors);
}

}  // namespace headroom::spec
