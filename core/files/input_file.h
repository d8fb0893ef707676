// Files a user hands us to read (model, tokenizer and dataset files): they must be regular
// files, and a file read whole must fit a stated limit.
//
// Why: open(2) on a FIFO blocks until a writer appears (a model "file" that is a pipe hung
// the worker forever), a character device may never end, and a file parsed whole costs
// several times its size in memory, so an absurd one must be refused by its size, before
// it is read, not by the kernel's OOM killer.
//
// Contract:
//   - RequireRegularFile(path, what) returns when path (symbolic links followed) is a
//     regular file; otherwise throws InputFileError "PATH: is a FIFO, expected WHAT" (or a
//     directory, a socket, a device, missing: the reason named).
//   - OpenRegularFile(path, what) opens read-only without blocking on a FIFO (O_NONBLOCK,
//     cleared once fstat shows a regular file) and returns the descriptor, which the
//     caller closes; the same errors as RequireRegularFile.
//   - ReadWholeFile(path, limit, what) returns the bytes of a regular file of at most
//     `limit` bytes; a larger one throws InputFileError naming its size and the limit
//     before anything is read.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace headroom::files {

// An invalid_argument: an unusable input file is bad input (exit 2), not a crash.
class InputFileError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Limits on what is read whole or line by line (see README, "Reading inputs"). A JSON
// file of this size takes several times it in memory once parsed.
inline constexpr size_t kMaxJsonFileBytes = size_t{16} << 20;        // config.json, *_config.json, index
inline constexpr size_t kMaxTokenizerFileBytes = size_t{128} << 20;  // tokenizer.json (Gemma's: 33 MB)

void RequireRegularFile(const std::string& path, const std::string& what);
int OpenRegularFile(const std::string& path, const std::string& what);
std::string ReadWholeFile(const std::string& path, size_t limit, const std::string& what);

// "16 MiB", "1.5 GiB": a byte count for messages.
std::string HumanBytes(double bytes);

}  // namespace headroom::files
