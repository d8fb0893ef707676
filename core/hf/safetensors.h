// Safetensors files, read through mmap: the header is parsed, tensor data stays in the
// page cache and is viewed in place (a 15 GB checkpoint is never copied into memory whole).
//
// Format: 8 bytes little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {...}}
// then the data; offsets are relative to the end of the header.
//
// A model directory holds model.safetensors, or shards listed by
// model.safetensors.index.json ({"weight_map": {"name": "model-00001-of-00002.safetensors"}}).
// Errors are SafetensorsError naming the file (and the tensor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/base/non_copyable.h"

namespace headroom::hf {

// An invalid_argument: a bad model directory is bad input (the worker exits 2), not a crash.
class SafetensorsError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct TensorView {
  std::string dtype;  // "BF16", "F16", "F32", ...
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // inside the mapping; valid while the file lives
  size_t bytes = 0;
  std::string file;  // where it lives, for errors
};

// Bytes per element of a safetensors dtype, 0 when unknown.
size_t DtypeSize(const std::string& dtype);

// The largest header read, as the safetensors library itself bounds it (100 MB): a header
// is parsed whole, at several times its size, so a larger length is refused unread.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Throws SafetensorsError "FILE: tensor NAME holds NaN (element I)" (or inf) when a
// floating-point tensor (F64, F32, F16, BF16) holds a non-finite value: weights that
// would make every loss NaN are refused when loaded, naming the tensor. Other dtypes pass.
void RequireFinite(const TensorView& view, const std::string& name);

class SafetensorsFile : NonCopyable {
 public:
  // Maps `path` read-only and parses its header. Throws SafetensorsError: not a regular
  // file (a FIFO is refused, not waited on), a header longer than the file or than
  // kMaxHeaderBytes, a bad entry, data_offsets outside the data or overlapping another
  // tensor's (both named).
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();

  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* mapping_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Every tensor of a model directory (single file or sharded), by name.
class SafetensorsModel {
 public:
  // Throws SafetensorsError when neither layout is there or a shard is unreadable.
  explicit SafetensorsModel(const std::string& model_dir);
  // Throws SafetensorsError naming the directory and the tensor when it is missing.
  const TensorView& Get(const std::string& name) const;
  bool Has(const std::string& name) const { return tensors_.count(name) != 0; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::vector<std::string>& files() const { return file_names_; }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::string> file_names_;
  std::map<std::string, TensorView> tensors_;
};

struct TensorToWrite {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

// Writes one safetensors file (header with __metadata__ {"format": "pt"}, tensors in the
// given order, 8-byte aligned header). Throws SafetensorsError on I/O failure.
void WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors);

}  // namespace headroom::hf
