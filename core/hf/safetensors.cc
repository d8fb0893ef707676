#include "core/hf/safetensors.h"

#include "core/hf/weight_index.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/files/input_file.h"

namespace headroom::hf {
namespace {
using nlohmann::json;

[[noreturn]] void Fail(const std::string& file, const std::string& why) { throw SafetensorsError(file + ": " + why); }

// One tensor's header entry, its data inside [data, data + data_size).
TensorView ParseEntry(const std::string& path, const std::string& name, const json& entry, const std::byte* data,
                      size_t data_size) {
  const auto fail = [&](const std::string& why) { Fail(path, "tensor " + name + ": " + why); };
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
    fail("needs dtype, shape and data_offsets");
  TensorView view;
  view.file = path;
  view.dtype = entry["dtype"].get<std::string>();
  size_t elements = 1;
  for (const auto& d : entry["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) fail("bad shape " + entry["shape"].dump());
    view.shape.push_back(d.get<int64_t>());
    // No real tensor has 2^48 elements: a larger product is a bad shape, not an overflow.
    if (__builtin_mul_overflow(elements, static_cast<size_t>(d.get<int64_t>()), &elements) ||
        elements > (size_t{1} << 48)) {
      fail("shape " + entry["shape"].dump() + " is too large");
    }
  }
  const auto& off = entry["data_offsets"];
  if (!off.is_array() || off.size() != 2) fail("data_offsets must be [begin, end]");
  const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (begin > end || end > data_size) fail("data_offsets " + off.dump() + " outside the data");
  const size_t element_size = DtypeSize(view.dtype);
  if (element_size != 0 && (end - begin) != elements * element_size) {
    fail(std::to_string(end - begin) + " bytes for shape " + entry["shape"].dump() + " of " + view.dtype);
  }
  view.data = data + begin;
  view.bytes = end - begin;
  return view;
}

// The format gives each tensor its own bytes: two whose data_offsets overlap would alias
// each other (writing one would change the other). "" when none do.
std::string FindOverlap(const std::map<std::string, TensorView>& tensors, const std::byte* data) {
  std::vector<std::pair<const std::byte*, const std::string*>> starts;
  for (const auto& [name, view] : tensors) {
    if (view.bytes > 0) starts.emplace_back(view.data, &name);
  }
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i) {
    const TensorView& previous = tensors.at(*starts[i - 1].second);
    if (starts[i].first < previous.data + previous.bytes) {
      const auto offsets = [&](const TensorView& v) {
        return "[" + std::to_string(v.data - data) + ", " + std::to_string(v.data - data + v.bytes) + "]";
      };
      return "tensors " + *starts[i - 1].second + " " + offsets(previous) + " and " + *starts[i].second + " " +
             offsets(tensors.at(*starts[i].second)) + ": data_offsets overlap (each tensor must have its own bytes)";
    }
  }
  return "";
}

// The index of the first element whose exponent bits are all ones (NaN when its mantissa
// is non-zero, else an infinity), or the element count when every one is finite.
template <typename Bits>
size_t FirstNonFinite(const TensorView& view, Bits exponent, Bits mantissa, bool& nan) {
  const size_t n = view.bytes / sizeof(Bits);
  for (size_t i = 0; i < n; ++i) {
    Bits bits;
    std::memcpy(&bits, view.data + i * sizeof(Bits), sizeof(Bits));  // little-endian, as stored
    if ((bits & exponent) == exponent) {
      nan = (bits & mantissa) != 0;
      return i;
    }
  }
  return n;
}

}  // namespace

size_t DtypeSize(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "BF16" || dtype == "F16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

void RequireFinite(const TensorView& view, const std::string& name) {
  size_t at = 0;
  bool nan = false;
  if (view.dtype == "F64") {
    at = FirstNonFinite<uint64_t>(view, 0x7FF0000000000000ULL, 0x000FFFFFFFFFFFFFULL, nan);
  } else if (view.dtype == "F32") {
    at = FirstNonFinite<uint32_t>(view, 0x7F800000, 0x007FFFFF, nan);
  } else if (view.dtype == "F16") {
    at = FirstNonFinite<uint16_t>(view, 0x7C00, 0x03FF, nan);
  } else if (view.dtype == "BF16") {
    at = FirstNonFinite<uint16_t>(view, 0x7F80, 0x007F, nan);
  } else {
    return;
  }
  if (at * DtypeSize(view.dtype) < view.bytes) {
    Fail(view.file, "tensor " + name + " holds " + (nan ? "NaN" : "an infinity") + " (element " + std::to_string(at) +
                        "): the weights must be finite");
  }
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  int fd = -1;
  try {  // a FIFO is refused here rather than waited on
    fd = files::OpenRegularFile(path, "a safetensors file");
  } catch (const files::InputFileError& e) {
    throw SafetensorsError(e.what());
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    Fail(path, std::string("cannot stat: ") + std::strerror(errno));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    Fail(path, "too short to be a safetensors file (" + std::to_string(size_) + " bytes)");
  }
  mapping_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping_ == MAP_FAILED) {
    mapping_ = nullptr;
    Fail(path, std::string("cannot mmap: ") + std::strerror(errno));
  }
  const auto* base = static_cast<const std::byte*>(mapping_);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(base[i]);
  if (header_len > size_ - 8 || header_len > kMaxHeaderBytes) {
    ::munmap(mapping_, size_);
    mapping_ = nullptr;
    Fail(path, "header length " + std::to_string(header_len) +
                   (header_len > size_ - 8 ? " exceeds the file"
                                           : " is above the limit of " + std::to_string(kMaxHeaderBytes) + " bytes"));
  }
  json header;
  try {
    header = json::parse(reinterpret_cast<const char*>(base + 8), reinterpret_cast<const char*>(base + 8 + header_len));
  } catch (const json::parse_error& e) {
    ::munmap(mapping_, size_);
    mapping_ = nullptr;
    Fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  const std::byte* data = base + 8 + header_len;
  const size_t data_size = size_ - 8 - header_len;
  try {
    if (!header.is_object()) Fail(path, "header must be a JSON object");
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (entry.is_object())
          for (const auto& [k, v] : entry.items())
            if (v.is_string()) metadata_[k] = v.get<std::string>();
        continue;
      }
      tensors_.emplace(name, ParseEntry(path, name, entry, data, data_size));
    }
    if (std::string overlap = FindOverlap(tensors_, data); !overlap.empty()) Fail(path, overlap);
  } catch (const SafetensorsError&) {
    ::munmap(mapping_, size_);
    mapping_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_) ::munmap(mapping_, size_);
  mapping_ = nullptr;
}

SafetensorsModel::SafetensorsModel(const std::string& model_dir) : dir_(model_dir) {
  namespace fs = std::filesystem;
  const fs::path single = fs::path(model_dir) / "model.safetensors";
  const fs::path index = fs::path(model_dir) / "model.safetensors.index.json";
  std::vector<std::string> shards;
  if (fs::exists(index)) {
    json j;
    try {
      j = json::parse(files::ReadWholeFile(index.string(), files::kMaxJsonFileBytes, "a JSON file"));
    } catch (const files::InputFileError& e) {
      throw SafetensorsError(e.what());
    } catch (const json::exception& e) {
      Fail(index.string(), std::string("not valid JSON: ") + e.what());
    }
    try {
      shards = WeightMapShards(j);
    } catch (const WeightIndexError& e) {
      Fail(index.string(), e.what());
    }
  } else if (fs::exists(single)) {
    shards.push_back("model.safetensors");
  } else {
    Fail(model_dir, "no model.safetensors or model.safetensors.index.json");
  }
  for (const auto& shard : shards) {
    files_.push_back(std::make_unique<SafetensorsFile>((fs::path(model_dir) / shard).string()));
    file_names_.push_back(shard);
    for (const auto& [name, view] : files_.back()->tensors()) {
      if (!tensors_.emplace(name, view).second) Fail(files_.back()->path(), "tensor " + name + " appears twice");
    }
  }
}

const TensorView& SafetensorsModel::Get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) Fail(dir_, "missing tensor " + name);
  return it->second;
}

void WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');  // data starts 8-byte aligned
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) Fail(tmp, "cannot create");
    uint64_t n = text.size();
    char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    out.write(len, 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : tensors) out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.bytes));
    out.flush();
    if (!out) Fail(tmp, "write failed");
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace headroom::hf
