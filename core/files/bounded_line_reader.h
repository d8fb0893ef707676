// Reading a text stream line by line without ever holding more than a stated number of
// bytes of one line: a JSON Lines dataset or a tokenizer's stdin whose "line" is 1 GB
// (of NUL bytes, say) is refused after reading a little more than the limit, naming the
// line, instead of being read whole (std::getline would grow one string to the whole
// file, and a JSON parser would then take twice that again).
//
// Contract:
//   - Next(line) sets `line` to the next line without its "\n" and returns true; false at
//     the end of the stream (a last line without "\n" is still a line). line_number() is
//     then the 1-based number of the line returned.
//   - A line longer than max_line_bytes throws LineTooLongError for that line number
//     (line(); what() says the limit, not the line: callers prefix their "FILE:LINE: "),
//     after reading at most max_line_bytes plus one buffer (64 KiB) of it.
//   - A read error of the stream throws std::runtime_error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <istream>
#include <stdexcept>
#include <string>
#include <vector>

namespace headroom::files {

// The longest line (one dataset record, one tokenizer input) read: 4 MiB, about a million
// tokens of text, beyond any model's context and far above a real record (a long GSM8K or
// MATH problem is a few KiB). What a line costs once read is the tokenizer's: ~60 bytes per
// byte of text (README, "Reading inputs"), so this bounds that too.
inline constexpr size_t kMaxInputLineBytes = size_t{4} << 20;

class LineTooLongError : public std::invalid_argument {
 public:
  LineTooLongError(int64_t line, size_t limit);
  int64_t line() const { return line_; }
  size_t limit() const { return limit_; }

 private:
  int64_t line_;
  size_t limit_;
};

class BoundedLineReader {
 public:
  BoundedLineReader(std::istream& in, size_t max_line_bytes = kMaxInputLineBytes);
  bool Next(std::string& line);
  int64_t line_number() const { return line_number_; }

 private:
  bool Fill();  // more bytes into buffer_; false at the end of the stream

  std::istream& in_;
  size_t max_line_bytes_;
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;  // unread bytes: buffer_[begin_, end_)
  int64_t line_number_ = 0;
};

}  // namespace headroom::files
