// Writing files so that they survive a crash or power loss at any instant.
//
// The rules a checkpoint relies on:
//   - a file's bytes are durable once it is fsync'd; its name is durable once the
//     directory holding it is fsync'd;
//   - rename(2) within one filesystem replaces a name atomically: a reader sees the old
//     file or the new one, never a mix.
//   - a finished directory is published under its final name by one rename (or, when
//     that name exists, one atomic exchange), so a reader sees the old one or the new one.
// Every function throws CheckpointError naming the path and the system error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "core/base/non_copyable.h"
#include "core/checkpoint/checkpoint_error.h"
#include "core/checkpoint/sha256.h"

namespace headroom::checkpoint {

// A file opened for writing from scratch (created or truncated). Write() loops over
// partial writes and EINTR and hashes what it wrote (sha256_hex(): the SHA-256 of every
// byte written so far, as the manifest records it); Sync() is fsync; Close() syncs
// nothing by itself.
class DurableFile : NonCopyable {
 public:
  explicit DurableFile(const std::filesystem::path& path);
  ~DurableFile();

  void Write(const void* data, size_t size);
  void Sync();
  void Close();
  uint64_t bytes_written() const { return bytes_written_; }
  std::string sha256_hex() const { return hash_.HexDigest(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  uint64_t bytes_written_ = 0;
  Sha256 hash_;
};

// fsync of a directory: makes the names created, renamed or removed in it durable.
void SyncDirectory(const std::filesystem::path& dir);

// The one atomic file write: readers see the old `path` or the whole new one (a temporary
// beside it, fsync'd, renamed over it, the directory fsync'd); on failure `path` is as it was.
void ReplaceFileAtomically(const std::filesystem::path& path, const std::string& contents);

// The whole file, by files::ReadWholeFile; throws CheckpointError naming the path if unreadable.
std::string ReadWholeFile(const std::filesystem::path& path);

// Puts the finished directory `staged` at `target` and fsyncs target's parent: a plain
// rename when `target` is absent; else an atomic exchange (RENAME_EXCHANGE), after which
// the replaced directory, now at `staged`, is removed; else, where the filesystem has no
// exchange, the old one is moved to `<target>.replaced` first and removed after. The
// caller decides whether `target` may be replaced.
void PublishDirectory(const std::filesystem::path& staged, const std::filesystem::path& target);

}  // namespace headroom::checkpoint
