#include "core/hf/hf_export.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/files/remove_tree.h"
#include "core/hf/safetensors.h"

namespace headroom::hf {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kCheckpointModelPrefix = "model.";  // the worker's kModelTensorPrefix

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ExportError(path.string() + ": cannot be read");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path StepDir(const fs::path& checkpoint) {
  if (fs::exists(checkpoint / "manifest.json")) return checkpoint;
  const fs::path latest = checkpoint / "latest";
  if (!fs::exists(latest)) {
    throw ExportError(checkpoint.string() + ": neither a checkpoint step (manifest.json) nor a checkpoint directory (latest)");
  }
  std::string name = ReadText(latest);
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
  const fs::path step = checkpoint / name;
  if (!fs::exists(step / "manifest.json")) throw ExportError(latest.string() + " names " + name + ", which has no manifest.json");
  return step;
}

// The fp32 values of checkpoint tensor `name`, assembled from its shards.
std::vector<float> ReadCheckpointTensor(const fs::path& step, const json& manifest, const std::string& name,
                                        const std::vector<int64_t>& want_shape, const std::string& source_name) {
  const std::string where = (step / "manifest.json").string() + ": tensors." + name;
  if (!manifest.contains("tensors") || !manifest["tensors"].contains(name)) {
    throw ExportError((step / "manifest.json").string() + ": no tensor " + name + " (the source model's " + source_name +
                      "); was the checkpoint written from this model?");
  }
  const json& t = manifest["tensors"][name];
  if (t.value("dtype", "") != "float32") {
    throw ExportError(where + ".dtype: " + t.value("dtype", "?") + " is not supported (float32 master weights)");
  }
  const auto shape = t.value("shape", std::vector<int64_t>{});
  if (shape != want_shape) {
    throw ExportError(where + ".shape: " + json(shape).dump() + ", the source model's " + source_name + " is " +
                      json(want_shape).dump());
  }
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  std::vector<float> values(static_cast<size_t>(numel));
  int64_t covered = 0;
  for (const json& s : t.value("shards", json::array())) {
    const int64_t offset = s.value("offset", int64_t{-1}), n = s.value("numel", int64_t{-1});
    const int64_t file_offset = s.value("file_offset", int64_t{-1});
    if (offset < 0 || n < 0 || file_offset < 0 || offset + n > numel) throw ExportError(where + ".shards: a shard outside the tensor");
    const fs::path file = step / s.value("file", "");
    std::ifstream in(file, std::ios::binary);
    if (!in) throw ExportError(file.string() + ": cannot be read (a shard of " + name + ")");
    in.seekg(file_offset);
    in.read(reinterpret_cast<char*>(values.data() + offset), static_cast<std::streamsize>(n * sizeof(float)));
    if (!in) throw ExportError(file.string() + ": too short for the shard of " + name + " at byte " + std::to_string(file_offset));
    covered += n;
  }
  if (covered != numel) {
    throw ExportError(where + ".shards: cover " + std::to_string(covered) + " of " + std::to_string(numel) + " elements");
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
  if (dtype != "BF16" && dtype != "F16") throw ExportError(where + ": dtype " + dtype + " is not supported (BF16, F16, F32)");
  out.resize(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = dtype == "BF16" ? Bf16FromFloat(values[i]) : F16FromFloat(values[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

// fsync of a file or a directory: its bytes, or the names in it, survive a crash.
void SyncPath(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ExportError("cannot open " + path.string() + " to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw ExportError("cannot sync " + path.string() + ": " + std::strerror(err));
}

// An existing `out` may be replaced only when it is a model directory or empty: a
// mistyped --to must not delete unrelated files.
void RequireReplaceable(const fs::path& out) {
  if (!fs::exists(out)) return;
  const bool model_dir = fs::exists(out / "config.json");
  if (!fs::is_directory(out) || (!model_dir && !fs::is_empty(out))) {
    throw ExportError(out.string() + ": exists and is not a model directory (no config.json); refusing to replace it");
  }
}

// Puts the finished `partial` directory at `out`: a plain rename when `out` is absent, else
// an atomic exchange (the old export then sits at `partial` and is removed), else, where
// the filesystem has no exchange, the old one moved aside first.
void Publish(const fs::path& partial, const fs::path& out) {
  RequireReplaceable(out);
  if (::rename(partial.c_str(), out.c_str()) != 0) {
    if (errno != EEXIST && errno != ENOTEMPTY) {
      throw ExportError("cannot rename " + partial.string() + " to " + out.string() + ": " + std::strerror(errno));
    }
    if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) == 0) {
      files::RemoveTree(partial);  // now the replaced export
    } else {
      fs::path aside = out;
      aside += ".replaced";
      files::RemoveTree(aside);
      fs::rename(out, aside);
      fs::rename(partial, out);
      files::RemoveTree(aside);
    }
  }
  SyncPath(out.has_parent_path() ? out.parent_path() : fs::path("."));
}

// The export itself, into `out` (a fresh directory).
void WriteExport(const fs::path& step, const json& manifest, const fs::path& source, const fs::path& out,
                 int64_t max_shard_bytes, ExportSummary& summary) {
  const SafetensorsModel model(source.string());  // names, dtypes, shapes to reproduce
  fs::create_directories(out);

  // Group the tensors (in name order) into shards of at most max_shard_bytes.
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
      const auto values = ReadCheckpointTensor(step, manifest, kCheckpointModelPrefix + name, view.shape, name);
      data.push_back(Encode(values, view.dtype, view.file + ": tensor " + name));
      tensors.push_back({name, view.dtype, view.shape, data.back().data(), data.back().size()});
      weight_map[name] = file;
      ++summary.tensors;
    }
    WriteSafetensors((out / file).string(), tensors);
    summary.files.push_back(file);
  }
  if (shards.size() > 1) {
    const json index = {{"metadata", {{"total_size", summary.tensor_bytes}}}, {"weight_map", weight_map}};
    std::ofstream index_file(out / "model.safetensors.index.json");
    index_file << index.dump(2) << "\n";
    index_file.close();
    if (!index_file) throw ExportError((out / "model.safetensors.index.json").string() + ": write failed");
    summary.files.push_back("model.safetensors.index.json");
  }
  // Everything else of the source (config.json unchanged, generation and tokenizer files).
  for (const auto& entry : fs::directory_iterator(source)) {
    const std::string name = entry.path().filename().string();
    const bool weights = entry.path().extension() == ".safetensors" || name == "model.safetensors.index.json";
    if (!entry.is_regular_file() || weights) continue;
    fs::copy_file(entry.path(), out / name, fs::copy_options::overwrite_existing);
    summary.files.push_back(name);
  }
  for (const std::string& name : summary.files) SyncPath(out / name);
  SyncPath(out);
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

ExportSummary ExportCheckpoint(const std::string& checkpoint, const std::string& out_dir, const std::string& model_dir,
                               int64_t max_shard_bytes) {
  ExportSummary summary;
  const fs::path step = StepDir(checkpoint);
  summary.step_dir = step.string();
  json manifest;
  try {
    manifest = json::parse(ReadText(step / "manifest.json"));
  } catch (const json::parse_error& e) {
    throw ExportError((step / "manifest.json").string() + ": not valid JSON: " + e.what());
  }
  summary.model_dir = model_dir;
  if (summary.model_dir.empty()) {
    const json extra = manifest.value("extra", json::object());
    if (!extra.is_object() || !extra.contains("model_path") || !extra["model_path"].is_string()) {
      throw ExportError((step / "manifest.json").string() +
                        ": extra.model_path: missing (not a Hugging Face model's checkpoint?); name the source directory");
    }
    summary.model_dir = extra["model_path"].get<std::string>();
  }
  const fs::path source = summary.model_dir;
  fs::path out = fs::path(out_dir).lexically_normal();
  if (out.filename().empty()) out = out.parent_path();  // "dir/" names dir
  RequireReplaceable(out);  // before any work
  fs::path partial = out;
  partial += ".partial";
  // What a failed export left. RemoveTree, not remove_all: this runs inside the worker,
  // where a PyTorch wheel's LibTorch breaks remove_all (core/files/remove_tree.h).
  files::RemoveTree(partial);
  try {
    WriteExport(step, manifest, source, partial, max_shard_bytes, summary);
    Publish(partial, out);
  } catch (...) {
    std::error_code ignored;
    files::RemoveTree(partial, ignored);
    throw;
  }
  return summary;
}

}  // namespace headroom::hf
