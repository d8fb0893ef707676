#include "core/hf/hf_export.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/checkpoint/checkpoint_layout.h"
#include "core/checkpoint/checkpoint_manifest.h"
#include "core/checkpoint/durable_file.h"
#include "core/checkpoint/fault_point.h"
#include "core/files/remove_tree.h"
#include "core/hf/hf_config.h"
#include "core/hf/safetensors.h"

namespace headroom::hf {
namespace {
namespace fs = std::filesystem;
using checkpoint::CheckpointError;
using checkpoint::CheckpointManifest;
using nlohmann::json;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ExportError(path.string() + ": cannot be read");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The step to export and its manifest, every file of it checked against its recorded size
// and sha256: a damaged checkpoint is refused, naming the file, before anything is written.
CheckpointManifest ReadVerifiedStep(const fs::path& step) {
  try {
    CheckpointManifest manifest = CheckpointManifest::Read(step);
    for (const auto& [file, bytes] : manifest.file_bytes) manifest.VerifyFile(step, file);
    return manifest;
  } catch (const CheckpointError& e) {
    throw ExportError(e.what());
  }
}

// The fp32 values of checkpoint tensor `name`, assembled from its shards (validated: they
// tile the tensor and lie inside their files).
std::vector<float> ReadCheckpointTensor(const fs::path& step, const CheckpointManifest& manifest,
                                        const std::string& name, const std::vector<int64_t>& want_shape,
                                        const std::string& source_name) {
  const std::string where = (step / checkpoint::kManifestFileName).string() + ": tensors." + name;
  auto it = manifest.tensors.find(name);
  if (it == manifest.tensors.end()) {
    throw ExportError((step / checkpoint::kManifestFileName).string() + ": no tensor " + name +
                      " (the source model's " + source_name + "); was the checkpoint written from this model?");
  }
  const checkpoint::TensorEntry& t = it->second;
  if (t.dtype != "float32")
    throw ExportError(where + ".dtype: " + t.dtype + " is not supported (float32 master weights)");
  if (t.shape != want_shape) {
    throw ExportError(where + ".shape: " + json(t.shape).dump() + ", the source model's " + source_name + " is " +
                      json(want_shape).dump());
  }
  std::vector<float> values(static_cast<size_t>(t.numel()));
  for (const checkpoint::ShardEntry& s : t.shards) {
    const fs::path file = step / s.file;
    std::ifstream in(file, std::ios::binary);
    if (!in) throw ExportError(file.string() + ": cannot be read (a shard of " + name + ")");
    in.seekg(s.file_offset);
    in.read(reinterpret_cast<char*>(values.data() + s.offset), static_cast<std::streamsize>(s.numel * sizeof(float)));
    if (!in)
      throw ExportError(file.string() + ": too short for the shard of " + name + " at byte " +
                        std::to_string(s.file_offset));
  }
  return values;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The values in the source tensor's dtype, as raw little-endian bytes.
std::vector<std::byte> Encode(const std::vector<float>& values, const std::string& dtype, const std::string& where) {
  std::vector<std::byte> out;
  if (dtype == "F32") {
    out.resize(values.size() * 4);
    std::memcpy(out.data(), values.data(), out.size());
    return out;
  }
  if (dtype != "BF16" && dtype != "F16")
    throw ExportError(where + ": dtype " + dtype + " is not supported (BF16, F16, F32)");
  out.resize(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = dtype == "BF16" ? Bf16FromFloat(values[i]) : F16FromFloat(values[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

// fsync of a file: its bytes survive a crash.
void SyncFile(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ExportError("cannot open " + path.string() + " to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw ExportError("cannot sync " + path.string() + ": " + std::strerror(err));
}

// `path` absolute, symbolic links resolved as far as it exists, without a trailing "/".
fs::path Resolved(const fs::path& path) {
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(fs::absolute(path), ec).lexically_normal();
  if (ec) resolved = fs::absolute(path).lexically_normal();
  if (resolved.filename().empty() && resolved.has_parent_path()) resolved = resolved.parent_path();
  return resolved;
}

// `inner` is `outer` (the same directory, however named) or lies inside it.
bool IsSameOrInside(const fs::path& inner, const fs::path& outer) {
  std::error_code ec;
  if (fs::exists(inner) && fs::exists(outer) && fs::equivalent(inner, outer, ec)) return true;
  const std::string rel = Resolved(inner).lexically_relative(Resolved(outer)).string();
  return !rel.empty() && rel != ".." && rel.rfind("../", 0) != 0;
}

// The names an earlier export recorded in its marker file; nullopt when `dir` has none.
std::optional<std::set<std::string>> MarkedFiles(const fs::path& dir) {
  const fs::path marker = dir / kExportMarkerFileName;
  if (!fs::exists(marker)) return std::nullopt;
  std::set<std::string> names;
  try {
    const json parsed = json::parse(ReadText(marker));
    for (const auto& name : parsed.at("files")) names.insert(name.get<std::string>());
  } catch (const json::exception& e) {
    throw ExportError(marker.string() + ": not an export marker (" + e.what() + "); refusing to replace " +
                      dir.string());
  }
  return names;
}

// `out` may be written only where that deletes nothing the export does not own: it is
// absent or empty, or it holds exactly what an earlier export wrote (its marker lists it).
// Never the source model, the checkpoint, or a directory holding either.
void RequireOwnedOrAbsent(const fs::path& out, const fs::path& source, const fs::path& step) {
  if (IsSameOrInside(source, out)) {
    const std::string what =
        IsSameOrInside(out, source) ? "the source model's directory" : "a directory holding the source model";
    throw ExportError(out.string() + " is " + what + " (" + source.string() +
                      "); refusing to overwrite it: choose another --to");
  }
  if (IsSameOrInside(step, out)) {
    throw ExportError(out.string() + " holds the checkpoint being exported (" + step.string() +
                      "); refusing to overwrite it: choose another --to");
  }
  if (!fs::exists(out)) return;
  if (!fs::is_directory(out))
    throw ExportError(out.string() + ": exists and is not a directory; refusing to replace it");
  if (fs::is_empty(out)) return;
  const auto owned = MarkedFiles(out);
  if (!owned) {
    throw ExportError(out.string() + ": exists and was not written by headroom export (no " + kExportMarkerFileName +
                      "); refusing to replace it: move it away or choose another --to");
  }
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (name != kExportMarkerFileName && !owned->count(name)) {
      throw ExportError(entry.path().string() + " was not written by headroom export; refusing to replace " +
                        out.string() + ": move it away or choose another --to");
    }
  }
}

// A source tensor the checkpoint does not hold because the model does not train it: a
// rotary `inv_freq` buffer (derived from config.json; loading ignores it) is copied as it
// was; an untied `lm_head.weight` of a model that ties its head to the embedding gets the
// trained embedding, the head the fine-tuned model computes with. nullopt: not such a tensor.
std::optional<std::string> UntrainedTensorSource(const std::string& name, const HfModelConfig& config) {
  const std::string inv_freq = "rotary_emb.inv_freq";
  if (name.size() >= inv_freq.size() && name.compare(name.size() - inv_freq.size(), inv_freq.size(), inv_freq) == 0) {
    return std::string();  // the source's own bytes
  }
  if (name == "lm_head.weight" && config.tie_word_embeddings) return std::string("model.embed_tokens.weight");
  return std::nullopt;
}

// The bytes of source tensor `name` as the export writes them, in the source's dtype.
std::vector<std::byte> ExportedBytes(const fs::path& step, const CheckpointManifest& manifest,
                                     const HfModelConfig& config, const std::string& name, const TensorView& view,
                                     ExportSummary& summary) {
  std::string from = checkpoint::kModelTensorPrefix + name;
  if (!manifest.tensors.count(from)) {
    if (const auto untrained = UntrainedTensorSource(name, config)) {
      if (untrained->empty()) {
        summary.copied_from_source.push_back(name);
        const auto* begin = view.data;
        return std::vector<std::byte>(begin, begin + view.bytes);
      }
      from = checkpoint::kModelTensorPrefix + *untrained;
      summary.tied_to_trained.push_back(name);
    }
  }
  const auto values = ReadCheckpointTensor(step, manifest, from, view.shape, name);
  return Encode(values, view.dtype, view.file + ": tensor " + name);
}

// --- LoRA ----------------------------------------------------------------------------

void WriteTextFile(const fs::path& path, const std::string& text);

bool IsAdapterTensor(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

// The checkpoint's LoRA record (extra.lora), or null for a full fine-tune's checkpoint.
const json* LoraRecord(const CheckpointManifest& manifest) {
  const json& extra = manifest.extra;
  return extra.is_object() && extra.contains("lora") && extra["lora"].is_object() ? &extra["lora"] : nullptr;
}

double LoraScaleOf(const json& lora) {
  const double r = lora.value("r", 0.0), alpha = lora.value("alpha", r);
  if (r <= 0) throw ExportError("extra.lora.r: " + std::to_string(r) + " is not a rank");
  return lora.value("rs_lora", false) ? alpha / std::sqrt(r) : alpha / r;
}

std::vector<float> Decode(const TensorView& view, const std::string& name) {
  const size_t n = view.bytes / std::max<size_t>(1, DtypeSize(view.dtype));
  std::vector<float> out(n);
  if (view.dtype == "F32") {
    std::memcpy(out.data(), view.data, n * 4);
    return out;
  }
  if (view.dtype != "BF16" && view.dtype != "F16")
    throw ExportError(view.file + ": tensor " + name + ": dtype " + view.dtype + " is not supported (BF16, F16, F32)");
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, view.data + 2 * i, 2);
    if (view.dtype == "BF16") {
      const uint32_t u = static_cast<uint32_t>(h) << 16;
      std::memcpy(&out[i], &u, 4);
    } else {
      const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
      float v;
      if (exp == 0) {
        v = std::ldexp(static_cast<float>(mant), -24);
      } else if (exp == 0x1f) {
        v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
      } else {
        v = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
      }
      uint32_t u;
      std::memcpy(&u, &v, 4);
      u |= sign;
      std::memcpy(&out[i], &u, 4);
    }
  }
  return out;
}

// Source tensor `name` with its adapter folded in when the checkpoint has one for it
// (W + scale B A, in fp32, written in the source's dtype), else the source's own bytes.
std::vector<std::byte> MergedBytes(const fs::path& step, const CheckpointManifest& manifest, double scale,
                                   const std::string& name, const TensorView& view) {
  const std::string weight = ".weight";
  const bool is_weight =
      name.size() > weight.size() && name.compare(name.size() - weight.size(), weight.size(), weight) == 0;
  const std::string stem = is_weight ? name.substr(0, name.size() - weight.size()) : name;
  const std::string a_name = checkpoint::kModelTensorPrefix + stem + ".lora_A.weight";
  const std::string b_name = checkpoint::kModelTensorPrefix + stem + ".lora_B.weight";
  if (!is_weight || !manifest.tensors.count(a_name) || view.shape.size() != 2) {
    return std::vector<std::byte>(view.data, view.data + view.bytes);
  }
  const int64_t out = view.shape[0], in = view.shape[1];
  const int64_t r = manifest.tensors.at(a_name).shape.empty() ? 0 : manifest.tensors.at(a_name).shape[0];
  const std::vector<float> a = ReadCheckpointTensor(step, manifest, a_name, {r, in}, name + "'s lora_A");
  const std::vector<float> b = ReadCheckpointTensor(step, manifest, b_name, {out, r}, name + "'s lora_B");
  std::vector<float> w = Decode(view, name);
  for (int64_t o = 0; o < out; ++o) {
    float* row = w.data() + o * in;
    for (int64_t k = 0; k < r; ++k) {
      const float coef = static_cast<float>(scale * b[static_cast<size_t>(o * r + k)]);
      const float* a_row = a.data() + k * in;
      for (int64_t i = 0; i < in; ++i) row[i] += coef * a_row[i];
    }
  }
  return Encode(w, view.dtype, view.file + ": tensor " + name);
}

// The adapters alone, in PEFT's format (hf_export.h).
void WriteLoraAdapter(const fs::path& step, const CheckpointManifest& manifest, const json& lora, const fs::path& out,
                      ExportSummary& summary) {
  fs::create_directories(out);
  const std::string prefix = checkpoint::kModelTensorPrefix;
  std::vector<std::vector<std::byte>> data;
  std::vector<TensorToWrite> tensors;
  std::vector<std::string> names;
  for (const auto& [name, entry] : manifest.tensors) {
    if (name.rfind(prefix, 0) == 0 && IsAdapterTensor(name)) names.push_back(name);
  }
  if (names.empty())
    throw ExportError((step / checkpoint::kManifestFileName).string() + ": extra.lora is set but no "
                                                                        "tensor is an adapter's (lora_A, lora_B)");
  data.reserve(names.size());
  std::vector<std::string> peft_names;
  peft_names.reserve(names.size());
  for (const std::string& name : names) {
    const auto& shape = manifest.tensors.at(name).shape;
    const std::vector<float> values = ReadCheckpointTensor(step, manifest, name, shape, name);
    data.push_back(Encode(values, "F32", name));
    peft_names.push_back(std::string(kPeftTensorPrefix) + name.substr(prefix.size()));
    tensors.push_back({peft_names.back(), "F32", shape, data.back().data(), data.back().size()});
    summary.tensor_bytes += static_cast<int64_t>(data.back().size());
    ++summary.tensors;
  }
  WriteSafetensors((out / kPeftWeightsFileName).string(), tensors);
  summary.files.push_back(kPeftWeightsFileName);
  const json base = lora.value("base", json::object());
  json config = {{"peft_type", "LORA"},
                 {"task_type", "CAUSAL_LM"},
                 {"r", lora.value("r", 0)},
                 {"lora_alpha", lora.value("alpha", 0.0)},
                 {"lora_dropout", lora.value("dropout", 0.0)},
                 {"target_modules", lora.value("target_modules", json::array())},
                 {"use_rslora", lora.value("rs_lora", false)},
                 {"bias", "none"},
                 {"fan_in_fan_out", false},
                 {"inference_mode", true},
                 {"init_lora_weights", true},
                 {"modules_to_save", nullptr},
                 {"base_model_name_or_path", nullptr},
                 {"revision", nullptr}};
  if (base.contains("hub")) {
    config["base_model_name_or_path"] = base["hub"].value("repo", "");
    config["revision"] = base["hub"].value("revision", "");
  } else if (base.contains("path")) {
    config["base_model_name_or_path"] = base["path"];
  }
  WriteTextFile(out / kPeftConfigFileName, config.dump(2) + "\n");
  summary.files.push_back(kPeftConfigFileName);
}

// The source's tensors (in name order) grouped into shards of at most max_shard_bytes.
std::vector<std::vector<std::string>> GroupIntoShards(const SafetensorsModel& model, int64_t max_shard_bytes,
                                                      ExportSummary& summary) {
  std::vector<std::vector<std::string>> shards(1);
  int64_t shard_bytes = 0;
  for (const auto& [name, view] : model.tensors()) {
    const auto bytes = static_cast<int64_t>(view.bytes);
    if (shard_bytes > 0 && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(name);
    shard_bytes += bytes;
    summary.tensor_bytes += bytes;
  }
  return shards;
}

void WriteTextFile(const fs::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) throw ExportError(path.string() + ": write failed");
}

void WriteModel(const fs::path& step, const CheckpointManifest& manifest, const fs::path& source, const fs::path& out,
                int64_t max_shard_bytes, const json* lora, ExportSummary& summary);

// The export itself, into `out` (a fresh directory), its marker written last.
void WriteExport(const fs::path& step, const CheckpointManifest& manifest, const fs::path& source, const fs::path& out,
                 int64_t max_shard_bytes, bool merge_lora, ExportSummary& summary) {
  const json* lora = LoraRecord(manifest);
  if (lora && !merge_lora) {
    WriteLoraAdapter(step, manifest, *lora, out, summary);
  } else {
    WriteModel(step, manifest, source, out, max_shard_bytes, lora, summary);
  }
  WriteTextFile(
      out / kExportMarkerFileName,
      json({{"written_by", "headroom export"}, {"checkpoint", step.string()}, {"files", summary.files}}).dump(1) +
          "\n");
  for (const std::string& name : summary.files) SyncFile(out / name);
  SyncFile(out / kExportMarkerFileName);
  checkpoint::SyncDirectory(out);
}

// The full model in the source's layout; `lora` (non-null) folds the adapters into the
// frozen base's weights, which the checkpoint does not hold.
void WriteModel(const fs::path& step, const CheckpointManifest& manifest, const fs::path& source, const fs::path& out,
                int64_t max_shard_bytes, const json* lora, ExportSummary& summary) {
  const SafetensorsModel model(source.string());  // names, dtypes, shapes to reproduce
  const HfModelConfig config = LoadHfConfig(source.string());
  const double scale = lora ? LoraScaleOf(*lora) : 0;
  fs::create_directories(out);
  const auto shards = GroupIntoShards(model, max_shard_bytes, summary);
  json weight_map = json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    char file_name[64];
    std::snprintf(file_name, sizeof file_name, "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
    const std::string file = shards.size() == 1 ? "model.safetensors" : file_name;
    std::vector<std::vector<std::byte>> data;
    std::vector<TensorToWrite> tensors;
    data.reserve(shards[k].size());
    for (const std::string& name : shards[k]) {
      const TensorView& view = model.Get(name);
      data.push_back(lora ? MergedBytes(step, manifest, scale, name, view)
                          : ExportedBytes(step, manifest, config, name, view, summary));
      tensors.push_back({name, view.dtype, view.shape, data.back().data(), data.back().size()});
      weight_map[name] = file;
      ++summary.tensors;
    }
    WriteSafetensors((out / file).string(), tensors);
    summary.files.push_back(file);
  }
  if (shards.size() > 1) {
    const json index = {{"metadata", {{"total_size", summary.tensor_bytes}}}, {"weight_map", weight_map}};
    WriteTextFile(out / "model.safetensors.index.json", index.dump(2) + "\n");
    summary.files.push_back("model.safetensors.index.json");
  }
  // Everything else of the source (config.json unchanged, generation and tokenizer files).
  for (const auto& entry : fs::directory_iterator(source)) {
    const std::string name = entry.path().filename().string();
    const bool weights = entry.path().extension() == ".safetensors" || name == "model.safetensors.index.json";
    if (!entry.is_regular_file() || weights || name == kExportMarkerFileName) continue;
    fs::copy_file(entry.path(), out / name, fs::copy_options::overwrite_existing);
    summary.files.push_back(name);
  }
}

// The source directory: `model_dir`, else the manifest's extra.model_path, which must be
// absolute (a relative one was resolved against a working directory the checkpoint does
// not record).
fs::path SourceDir(const std::string& model_dir, const CheckpointManifest& manifest, const fs::path& step) {
  if (!model_dir.empty()) return fs::absolute(model_dir).lexically_normal();
  const std::string where = (step / checkpoint::kManifestFileName).string() + ": extra.model_path";
  const json& extra = manifest.extra;
  if (!extra.is_object() || !extra.contains("model_path") || !extra["model_path"].is_string()) {
    throw ExportError(where +
                      ": missing (not a Hugging Face model's checkpoint?); name the source directory with --model");
  }
  const fs::path recorded = extra["model_path"].get<std::string>();
  if (recorded.is_relative()) {
    throw ExportError(where + ": '" + recorded.string() +
                      "' is relative to the directory the job ran in, which the checkpoint does not record; name the "
                      "source directory with --model");
  }
  return recorded;
}

}  // namespace

std::string JobExportDir(const std::string& checkpoint_dir) {
  return (fs::path(checkpoint_dir) / kJobExportDirName).string();
}

uint16_t Bf16FromFloat(float value) {
  uint32_t u = Bits(value);
  if (std::isnan(value)) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet, keep sign
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

uint16_t F16FromFloat(float value) {
  const uint32_t x = Bits(value);
  const uint32_t sign = (x >> 16) & 0x8000;
  uint32_t mant = x & 0x7fffff;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff);
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));  // inf, NaN
  const int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00);  // too large: inf
  if (e <= 0) {                                                // a subnormal half, or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // a carry rounds up into the exponent
  return static_cast<uint16_t>(sign | half);
}

ExportSummary ExportCheckpoint(const std::string& checkpoint_path, const std::string& out_dir,
                               const std::string& model_dir, int64_t max_shard_bytes, bool merge_lora) {
  ExportSummary summary;
  fs::path step;
  try {
    step = checkpoint::StepDirOf(checkpoint_path);
  } catch (const CheckpointError& e) {
    throw ExportError(e.what());
  }
  summary.step_dir = step.string();
  const CheckpointManifest manifest = ReadVerifiedStep(step);
  const fs::path source = SourceDir(model_dir, manifest, step);
  summary.model_dir = source.string();
  fs::path out = fs::absolute(out_dir).lexically_normal();
  if (out.filename().empty()) out = out.parent_path();  // "dir/" names dir
  RequireOwnedOrAbsent(out, source, step);              // before any work
  fs::path partial = out;
  partial += checkpoint::kPartialSuffix;
  // What a failed export left. RemoveTree, not remove_all: this runs inside the worker,
  // where a PyTorch wheel's LibTorch breaks remove_all (core/files/remove_tree.h).
  files::RemoveTree(partial);
  try {
    WriteExport(step, manifest, source, partial, max_shard_bytes, merge_lora, summary);
    checkpoint::ReachedFaultPoint("export_written", manifest.step);
    RequireOwnedOrAbsent(out, source, step);  // nothing appeared there meanwhile
    checkpoint::PublishDirectory(partial, out);
  } catch (...) {
    std::error_code ignored;
    files::RemoveTree(partial, ignored);
    throw;
  }
  return summary;
}

}  // namespace headroom::hf
