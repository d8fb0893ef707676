// A text task's problems, read from a JSON Lines file (one JSON object per line, as
// GSM8K, MATH and most Hugging Face dataset exports are written), and the order a run
// visits them.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/files/bounded_line_reader.h"

namespace headroom::worker {

// A problem with the dataset file: what() is "FILE:LINE: message", or "FILE: message"
// when no one line is at fault (an unreadable or empty file).
class DatasetError : public std::runtime_error {
 public:
  DatasetError(const std::string& file, int64_t line, const std::string& message);
  const std::string& file() const { return file_; }
  int64_t line() const { return line_; }  // 1-based; 0 = the whole file

 private:
  std::string file_;
  int64_t line_;
};

struct DatasetRecord {
  std::string prompt;
  std::string answer;
  int64_t line = 0;  // 1-based line of the file it came from
};

class JsonlDataset {
 public:
  // Every non-blank line must be a JSON object with a string or number value at
  // prompt_key and at answer_key (a number becomes its JSON text: 72, 1.5); other keys
  // are ignored. Blank lines (whitespace only) are skipped; a "\r\n" line end and a
  // UTF-8 byte order mark are accepted. Throws DatasetError naming the file, the line
  // and, for a missing key, the key and the keys the line has: unreadable file, no
  // records, invalid JSON, a line that is not an object, a missing key, a value that is
  // neither string nor number, a path that is not a regular file (a FIFO is refused, not
  // waited on), and a line longer than max_line_bytes (refused after reading about that
  // much of it: loading never holds more than one line beyond the records kept).
  static JsonlDataset Load(const std::string& path, const std::string& prompt_key, const std::string& answer_key,
                           size_t max_line_bytes = files::kMaxInputLineBytes);

  int64_t size() const { return static_cast<int64_t>(records_.size()); }
  const DatasetRecord& operator[](int64_t i) const { return records_.at(static_cast<size_t>(i)); }
  const std::string& path() const { return path_; }

  // Keeps the records for which keep(record) is true, in their order; returns how many
  // were dropped (e.g. prompts longer than maxPromptLength). Throws DatasetError when
  // none is left; `reason` says why records are dropped, for that message.
  int64_t Filter(const std::function<bool(const DatasetRecord&)>& keep, const std::string& reason = "the filter");

  // FNV-1a 64 over the kept records' prompts and answers, in order (not their line
  // numbers or the file's name): a resume can refuse a dataset that changed under it.
  uint64_t content_hash() const;

 private:
  std::string path_;
  std::vector<DatasetRecord> records_;
};

// The order a run visits the records: global index g falls in epoch e = g / size at
// position g % size, and the record there is permutation_e[g % size], where
// permutation_e is a Fisher-Yates shuffle of 0..size-1 drawn from a CounterRng keyed by
// (seed, e). A pure function of (size, seed, g): the same on every rank, at every world
// size, and after a resume. Thread-safe; the current epoch's permutation is cached.
class DatasetOrder {
 public:
  DatasetOrder(int64_t size, uint64_t seed);  // size >= 1, else std::invalid_argument
  DatasetOrder(const DatasetOrder& other);
  DatasetOrder& operator=(const DatasetOrder& other);

  int64_t RecordAt(uint64_t global_index) const;
  int64_t Epoch(uint64_t global_index) const;
  int64_t Cursor(uint64_t global_index) const;  // position within the epoch
  int64_t size() const { return size_; }

  // The whole permutation of epoch `epoch` (what RecordAt reads).
  std::vector<int64_t> Permutation(int64_t epoch) const;

 private:
  int64_t size_;
  uint64_t seed_;
  mutable std::mutex mutex_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_;
};

}  // namespace headroom::worker
