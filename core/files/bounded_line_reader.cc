#include "core/files/bounded_line_reader.h"

#include <cstring>

#include "core/files/input_file.h"

namespace headroom::files {

LineTooLongError::LineTooLongError(int64_t line, size_t limit)
    : std::invalid_argument("the line is longer than " + HumanBytes(static_cast<double>(limit)) +
                            " (the limit for one line, one record)"),
      line_(line),
      limit_(limit) {}

BoundedLineReader::BoundedLineReader(std::istream& in, size_t max_line_bytes)
    : in_(in), max_line_bytes_(max_line_bytes), buffer_(size_t{64} << 10) {}

bool BoundedLineReader::Fill() {
  if (!in_.good()) return false;
  in_.read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  if (in_.bad()) throw std::runtime_error(std::string("read failed: ") + std::strerror(errno));
  begin_ = 0;
  end_ = static_cast<size_t>(in_.gcount());
  return end_ > 0;
}

bool BoundedLineReader::Next(std::string& line) {
  line.clear();
  bool any = false;
  for (;;) {
    if (begin_ == end_ && !Fill()) {
      if (!any) return false;
      ++line_number_;
      return true;
    }
    any = true;
    const char* start = buffer_.data() + begin_;
    const void* newline = std::memchr(start, '\n', end_ - begin_);
    const size_t take = newline ? static_cast<size_t>(static_cast<const char*>(newline) - start) : end_ - begin_;
    if (line.size() + take > max_line_bytes_) throw LineTooLongError(line_number_ + 1, max_line_bytes_);
    line.append(start, take);
    begin_ += take;
    if (newline) {
      ++begin_;
      ++line_number_;
      return true;
    }
  }
}

}  // namespace headroom::files
