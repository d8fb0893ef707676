#include "worker/train/checkpointer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>
#include <thread>

#include "core/checkpoint/sha256.h"
#include "core/spec/lora_targets.h"
#include "core/protocol/environment.h"
#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/checkpoint/intact_checkpoint.h"
#include "worker/checkpoint/rank_agreement.h"
#include "worker/train/training_state.h"

namespace headroom::worker {

namespace {

nlohmann::json HeldOutJson(const HeldOutScore& score) {
  nlohmann::json answers = nlohmann::json::array();
  for (const protocol::HeldOutAnswer& a : score.answers) {
    answers.push_back({{"question", a.question}, {"response", a.response}, {"correct", a.correct}});
  }
  return {{"reward", score.reward_mean},
          {"accuracy", score.exact_fraction},
          {"problems", score.problems},
          {"answers", answers}};
}

// What HeldOutJson wrote; nullopt for a checkpoint without it (or of another shape: it
// only informs the step log, so it never stops a resume).
std::optional<HeldOutScore> HeldOutFromJson(const nlohmann::json& extra) {
  if (!extra.is_object() || !extra.contains("heldout_before") || !extra["heldout_before"].is_object()) {
    return std::nullopt;
  }
  const nlohmann::json& j = extra["heldout_before"];
  HeldOutScore score;
  try {
    score.reward_mean = j.value("reward", 0.0);
    score.exact_fraction = j.value("accuracy", 0.0);
    score.problems = j.value("problems", int64_t{0});
    for (const nlohmann::json& a : j.value("answers", nlohmann::json::array())) {
      score.answers.push_back({a.value("question", ""), a.value("response", ""), a.value("correct", false)});
    }
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  return score;
}

// What a LoRA checkpoint records of the frozen base it was trained on (its adapters mean
// nothing on another): the directory (or Hub repository and revision) and the sha256 of
// each weight file; for a preset, its seed (the base is drawn from it). A file is hashed
// again only when its size or modification time changed: a 7B base's 15 GB take a while.
std::string WeightFileSha256(const std::filesystem::path& file) {
  struct Hashed {
    uintmax_t size = 0;
    std::filesystem::file_time_type modified;
    std::string sha256;
  };
  static std::map<std::string, Hashed> hashed;
  const uintmax_t size = std::filesystem::file_size(file);
  const auto modified = std::filesystem::last_write_time(file);
  auto found = hashed.find(file.string());
  if (found != hashed.end() && found->second.size == size && found->second.modified == modified) {
    return found->second.sha256;
  }
  Hashed h{size, modified, checkpoint::FileSha256(file)};
  hashed[file.string()] = h;
  return h.sha256;
}

nlohmann::json LoraBaseIdentity(const spec::TrainingJobSpec& spec, const std::string& model_dir) {
  if (model_dir.empty()) return {{"preset", spec.model.preset}, {"seed", spec.model.seed}};
  const std::string dir = std::filesystem::absolute(model_dir).lexically_normal().string();
  nlohmann::json files = nlohmann::json::object();
  std::vector<std::filesystem::path> weights;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".safetensors") weights.push_back(entry.path());
  }
  std::sort(weights.begin(), weights.end());
  for (const auto& w : weights) files[w.filename().string()] = WeightFileSha256(w);
  nlohmann::json id = {{"path", dir}, {"files", files}};
  if (!spec.model.hub.repo.empty()) id["hub"] = {{"repo", spec.model.hub.repo}, {"revision", spec.model.hub.revision}};
  return id;
}

nlohmann::json LoraJson(const spec::TrainingJobSpec& spec, const std::string& model_dir) {
  const spec::LoraSpec& l = spec.model.lora;
  return {{"r", l.r},
          {"alpha", l.alpha > 0 ? l.alpha : l.r},
          {"dropout", l.dropout},
          {"target_modules", spec::LoraTargets(l, hf::Architecture::kLlama)},
          {"rs_lora", l.rs_lora},
          {"base", LoraBaseIdentity(spec, model_dir)}};
}

// A LoRA checkpoint resumes only on the base it was trained on: every weight file the
// checkpoint recorded must hash as it did (the run-definition hash covers the spec, not
// the bytes a path holds now).
void RequireSameLoraBase(const nlohmann::json& extra, const nlohmann::json& now, const std::string& where) {
  if (!extra.is_object() || !extra.contains("lora") || !extra["lora"].contains("base")) return;
  const nlohmann::json& saved = extra["lora"]["base"];
  if (!saved.contains("files")) return;
  const nlohmann::json& files = now.value("files", nlohmann::json::object());
  for (const auto& [name, sha] : saved["files"].items()) {
    const std::string path = now.value("path", std::string()) + "/" + name;
    if (!files.contains(name)) {
      throw CheckpointOfAnotherRun("checkpoint " + where + " holds LoRA adapters of a base whose " + path +
                                   " no longer exists: resuming them on another base would train something else");
    }
    if (files[name] != sha) {
      throw CheckpointOfAnotherRun("checkpoint " + where + " holds LoRA adapters trained on a base whose " + name +
                                   " had sha256 " + sha.get<std::string>() + ", but " + path + " now has " +
                                   files[name].get<std::string>() +
                                   ": the base model changed (restore it, or start in a new checkpoint directory)");
    }
  }
}

}  // namespace

namespace {

// The guard's history this generation was launched with (opaque JSON; null when none),
// carried in the checkpoint so a resumed run knows what the guard already did.
nlohmann::json GuardHistoryFromEnvironment() {
  const char* v = std::getenv(protocol::kGuardHistoryEnv);
  if (!v || !*v) return nullptr;
  auto parsed = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? nlohmann::json(v) : parsed;
}

// The storage's refusal a save error names (its strerror text), "" for any other failure.
std::string StorageRefusal(const std::string& what) {
  for (const int error : {ENOSPC, EDQUOT, EROFS}) {
    const std::string text = std::strerror(error);
    if (what.find(text) != std::string::npos) return text;
  }
  return "";
}

// The refusal any rank saw (rank 0 alone may know the system's reason). Collective: the
// writer throws on every rank together.
std::string AgreedRefusal(Communicator& comm, const std::string& what) {
  for (const std::string& r : AllGatherBytes(comm, StorageRefusal(what))) {
    if (!r.empty()) return r;
  }
  return "";
}

// How long a refused save waits before its one retry: long enough for a cleanup that is
// under way, short against a step.
constexpr std::chrono::seconds kStorageRetryPause{2};

}  // namespace

Checkpointer::Checkpointer(std::string dir, const spec::TrainingJobSpec& spec, Communicator& comm, int rank,
                           GrpoTrainer& trainer)
    : dir_(std::move(dir)),
      spec_(spec),
      comm_(comm),
      rank_(rank),
      trainer_(trainer),
      spec_hash_(spec::RunDefinitionHash(spec)) {}

int64_t Checkpointer::Resume() {
  if (dir_.empty()) return 0;
  std::optional<CheckpointReader> reader;
  try {
    reader = OpenNewestIntactCheckpoint(dir_, comm_);
  } catch (const CheckpointError& e) {
    throw CheckpointUnusable(e.what());
  }
  // The writer after the reader: it clears half-written steps, never the one read.
  writer_.emplace(dir_, comm_, CheckpointWriterOptions{std::max(1, spec_.checkpoint.keep), {}});
  if (!reader) return 0;
  try {
    reader->RequireSpecHash(spec_hash_);
  } catch (const CheckpointError& e) {
    throw CheckpointOfAnotherRun(e.what());
  }
  RequireSameDataset(reader->manifest().extra, reader->dir().string());
  if (spec_.model.lora.enabled()) {
    RequireSameLoraBase(reader->manifest().extra, LoraBaseIdentity(spec_, trainer_.model_dir()),
                        reader->dir().string());
  }
  RestoreTrainingState(*reader, trainer_);
  starting_held_out_ = HeldOutFromJson(reader->manifest().extra);
  if (auto rng = reader->RngState(rank_)) SetCpuRngState(*rng);
  saved_step_ = reader->step();
  spdlog::info("resumed from {} (saved by {} ranks): continuing with step {}", reader->dir().string(),
               reader->manifest().world_size, saved_step_ + 1);
  return saved_step_;
}

void Checkpointer::RequireSameDataset(const nlohmann::json& extra, const std::string& where) const {
  const auto now = trainer_.DatasetAfter(0);
  if (!now || !extra.is_object() || !extra.contains("dataset")) return;
  const nlohmann::json& saved = extra["dataset"];
  const std::string saved_hash = saved.value("content_hash", "");
  if (saved_hash == now->content_hash) return;
  throw CheckpointOfAnotherRun("checkpoint " + where + " was trained on dataset " + saved.value("path", "?") +
                               " with content hash " + saved_hash + ", but " + now->path + " now hashes to " +
                               now->content_hash +
                               ": the dataset changed, so resuming would not continue the same order (restore the "
                               "dataset, or start in a new checkpoint directory)");
}

bool Checkpointer::ShouldSave(int64_t done) const {
  const int every = spec_.checkpoint.every_steps;
  return (every > 0 && done % every == 0) || done == spec_.grpo.steps;
}

std::optional<CheckpointSaveStats> Checkpointer::AfterStep(int64_t done) {
  return ShouldSave(done) ? Save(done) : std::nullopt;
}

std::optional<CheckpointSaveStats> Checkpointer::Save(int64_t done) {
  if (!writer_ || done == saved_step_) return std::nullopt;
  CheckpointMetadata meta;
  meta.step = done;
  meta.spec_hash = spec_hash_;
  meta.data_cursor = {{"next_step", done + 1}};
  meta.guard_history = GuardHistoryFromEnvironment();
  meta.extra = {{"world_size", comm_.world_size()},
                {"micro_batch_size", spec_.grpo.micro_batch_size},
                {"stage", spec_.sharding.stage}};
  // `headroom export` writes the fine-tuned weights back in the layout of the directory the
  // model was loaded from; made absolute here, where a relative path means what the worker
  // read, so an export from any working directory finds it.
  if (!trainer_.model_dir().empty()) {
    meta.extra["model_path"] = std::filesystem::absolute(trainer_.model_dir()).lexically_normal().string();
  }
  // Text tasks: which dataset contents the run has been reading, and where it stands in
  // them (the step alone determines the position; this makes it readable and checkable).
  if (const auto dataset = trainer_.DatasetAfter(done)) {
    meta.extra["dataset"] = {{"path", dataset->path},
                             {"content_hash", dataset->content_hash},
                             {"epoch", dataset->epoch},
                             {"cursor", dataset->cursor}};
  }
  // LoRA: the shards hold only the adapters and their optimizer state; the manifest says
  // what they adapt (`headroom export` writes them in PEFT's format from this).
  if (spec_.model.lora.enabled()) meta.extra["lora"] = LoraJson(spec_, trainer_.model_dir());
  if (starting_held_out_) meta.extra["heldout_before"] = HeldOutJson(*starting_held_out_);
  const std::vector<TensorSlice> slices = TrainingStateSlices(trainer_);
  const std::string rng = CpuRngState();
  std::optional<CheckpointSaveStats> saved;
  std::string first_refusal;
  while (!saved) {
    try {
      saved = writer_->Save(meta, slices, rng);
    } catch (const CheckpointError& e) {
      const std::string refusal = AgreedRefusal(comm_, e.what());
      if (refusal.empty()) throw;
      if (first_refusal.empty()) {
        first_refusal = refusal;
        spdlog::warn("checkpoint step {}: {}; trying once more in {} s", done, e.what(), kStorageRetryPause.count());
        std::this_thread::sleep_for(kStorageRetryPause);
        continue;
      }
      if (refusal != first_refusal) throw;
      throw CheckpointStorageRefused(std::string(e.what()) + " (the same on the retry after " +
                                     std::to_string(kStorageRetryPause.count()) +
                                     " s: retraining would not help; the newest complete checkpoint is kept)");
    }
  }
  CheckpointSaveStats stats = *saved;
  saved_step_ = done;
  spdlog::info("checkpoint step {}: {} bytes in {:.3f} s ({})", done, stats.total_bytes, stats.seconds,
               stats.dir.string());
  return stats;
}

}  // namespace headroom::worker
