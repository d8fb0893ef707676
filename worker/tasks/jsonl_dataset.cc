#include "worker/tasks/jsonl_dataset.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "core/files/bounded_line_reader.h"
#include "core/files/input_file.h"
#include "worker/tasks/counter_rng.h"

namespace headroom::worker {
namespace {

std::string Where(const std::string& file, int64_t line) {
  return line > 0 ? file + ":" + std::to_string(line) + ": " : file + ": ";
}

bool IsBlank(const std::string& line) { return line.find_first_not_of(" \t\r\n\f\v") == std::string::npos; }

// The text of a record's field: a string as is, a number as its JSON text.
std::string FieldText(const nlohmann::json& record, const std::string& key, const std::string& role,
                      const std::string& file, int64_t line) {
  auto it = record.find(key);
  if (it == record.end()) {
    std::string keys;
    for (const auto& [k, v] : record.items()) keys += (keys.empty() ? "\"" : ", \"") + k + "\"";
    throw DatasetError(file, line,
                       "no key \"" + key + "\" (the " + role + " key); the record has " +
                           (keys.empty() ? std::string("no keys") : "keys " + keys));
  }
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number()) return it->dump();
  throw DatasetError(file, line,
                     "key \"" + key + "\" (the " + role + " key) holds " + std::string(it->type_name()) +
                         "; expected a string or a number");
}

uint64_t Fnv1a64(uint64_t hash, const std::string& bytes) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

DatasetError::DatasetError(const std::string& file, int64_t line, const std::string& message)
    : std::runtime_error(Where(file, line) + message), file_(file), line_(line) {}

namespace {
// One record of the file: a JSON object holding both keys.
DatasetRecord ParseRecord(const std::string& line, const std::string& path, int64_t number,
                          const std::string& prompt_key, const std::string& answer_key) {
  nlohmann::json record;
  try {
    record = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 7: ...":
    // keep what follows the line, which is this line's column and the reason.
    std::string why = e.what();
    if (size_t at = why.find("column"); at != std::string::npos) why = why.substr(at);
    throw DatasetError(path, number, "invalid JSON (" + why + ")");
  }
  if (!record.is_object()) {
    throw DatasetError(path, number, std::string("expected a JSON object per line, got ") + record.type_name());
  }
  DatasetRecord r;
  r.prompt = FieldText(record, prompt_key, "prompt", path, number);
  r.answer = FieldText(record, answer_key, "answer", path, number);
  r.line = number;
  return r;
}

}  // namespace

JsonlDataset JsonlDataset::Load(const std::string& path, const std::string& prompt_key, const std::string& answer_key,
                                size_t max_line_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw DatasetError(path, 0, "is a directory, expected a .jsonl file");
  try {  // a FIFO would block the open below
    if (std::filesystem::exists(path, ec)) files::RequireRegularFile(path, "a .jsonl file");
  } catch (const files::InputFileError& e) {
    throw DatasetError(path, 0, std::string(e.what()).substr(path.size() + 2));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DatasetError(path, 0, std::string("cannot read: ") + std::strerror(errno));
  JsonlDataset dataset;
  dataset.path_ = path;
  files::BoundedLineReader lines(in, max_line_bytes);
  std::string line;
  try {
    while (lines.Next(line)) {
      const int64_t number = lines.line_number();
      if (number == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // UTF-8 byte order mark
      if (IsBlank(line)) continue;
      dataset.records_.push_back(ParseRecord(line, path, number, prompt_key, answer_key));
    }
  } catch (const files::LineTooLongError& e) {
    throw DatasetError(path, e.line(), e.what());
  } catch (const DatasetError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw DatasetError(path, 0, e.what());
  }
  if (dataset.records_.empty()) throw DatasetError(path, 0, "no records (the file is empty or blank)");
  return dataset;
}

int64_t JsonlDataset::Filter(const std::function<bool(const DatasetRecord&)>& keep, const std::string& reason) {
  const int64_t before = size();
  std::vector<DatasetRecord> kept;
  for (DatasetRecord& r : records_) {
    if (keep(r)) kept.push_back(std::move(r));
  }
  if (kept.empty()) {
    throw DatasetError(path_, 0, "no records left: all " + std::to_string(before) + " were dropped by " + reason);
  }
  records_ = std::move(kept);
  return before - size();
}

uint64_t JsonlDataset::content_hash() const {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const DatasetRecord& r : records_) {
    // Lengths first, so that no two different record lists give the same byte stream.
    hash = Fnv1a64(hash, std::to_string(r.prompt.size()) + ":" + r.prompt);
    hash = Fnv1a64(hash, std::to_string(r.answer.size()) + ":" + r.answer);
  }
  return hash;
}

DatasetOrder::DatasetOrder(int64_t size, uint64_t seed) : size_(size), seed_(seed) {
  if (size < 1) throw std::invalid_argument("DatasetOrder: size must be >= 1, got " + std::to_string(size));
}

DatasetOrder::DatasetOrder(const DatasetOrder& other) : size_(other.size_), seed_(other.seed_) {}

DatasetOrder& DatasetOrder::operator=(const DatasetOrder& other) {
  if (this == &other) return *this;
  std::lock_guard<std::mutex> lock(mutex_);
  size_ = other.size_;
  seed_ = other.seed_;
  cached_epoch_ = -1;
  cached_.clear();
  return *this;
}

int64_t DatasetOrder::Epoch(uint64_t global_index) const {
  return static_cast<int64_t>(global_index / static_cast<uint64_t>(size_));
}

int64_t DatasetOrder::Cursor(uint64_t global_index) const {
  return static_cast<int64_t>(global_index % static_cast<uint64_t>(size_));
}

std::vector<int64_t> DatasetOrder::Permutation(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(size_));
  std::iota(order.begin(), order.end(), int64_t{0});
  // Fisher-Yates, from a stream keyed by (seed, epoch) alone. The constant keeps these
  // streams apart from other CounterRng users keyed by the same seed.
  CounterRng rng(MixKey(seed_, 0x6461746173657421ULL /* "dataset!" */, static_cast<uint64_t>(epoch)));
  for (int64_t i = size_ - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

int64_t DatasetOrder::RecordAt(uint64_t global_index) const {
  const int64_t epoch = Epoch(global_index);
  std::lock_guard<std::mutex> lock(mutex_);
  if (epoch != cached_epoch_) {
    cached_ = Permutation(epoch);
    cached_epoch_ = epoch;
  }
  return cached_[static_cast<size_t>(Cursor(global_index))];
}

}  // namespace headroom::worker
