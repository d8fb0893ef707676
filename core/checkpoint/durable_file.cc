#include "core/checkpoint/durable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/files/input_file.h"
#include "core/files/remove_tree.h"

namespace headroom::checkpoint {
namespace {

[[noreturn]] void Fail(const std::string& what, const std::filesystem::path& path) {
  throw CheckpointError(what + " " + path.string() + ": " + std::strerror(errno));
}

}  // namespace

DurableFile::DurableFile(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) Fail("cannot create", path);
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) ::close(fd_);
}

void DurableFile::Write(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    // Linux writes at most ~2 GiB per call; larger requests come back partial.
    ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      Fail("cannot write", path_);
    }
    hash_.Update(p, static_cast<size_t>(n));
    p += n;
    size -= static_cast<size_t>(n);
    bytes_written_ += static_cast<uint64_t>(n);
  }
}

void DurableFile::Sync() {
  if (::fsync(fd_) != 0) Fail("cannot fsync", path_);
}

void DurableFile::Close() {
  if (fd_ >= 0 && ::close(fd_) != 0) {
    fd_ = -1;
    Fail("cannot close", path_);
  }
  fd_ = -1;
}

void SyncDirectory(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) Fail("cannot open directory", dir);
  if (::fsync(fd) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    Fail("cannot fsync directory", dir);
  }
  ::close(fd);
}

void ReplaceFileAtomically(const std::filesystem::path& path, const std::string& contents) {
  std::filesystem::path temp = path;
  temp += ".tmp-" + std::to_string(::getpid());
  try {
    DurableFile file(temp);
    file.Write(contents.data(), contents.size());
    file.Sync();
    file.Close();
    if (::rename(temp.c_str(), path.c_str()) != 0) Fail("cannot rename " + temp.string() + " to", path);
  } catch (const CheckpointError&) {
    // A full disk or a failed rename leaves `path` as it was and no temporary beside it.
    ::unlink(temp.c_str());
    throw;
  }
  SyncDirectory(path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path());
}

std::string ReadWholeFile(const std::filesystem::path& path) {
  try {
    return files::ReadWholeFile(path.string(), files::kMaxJsonFileBytes, "a checkpoint file");
  } catch (const files::InputFileError& e) {
    throw CheckpointError(e.what());
  }
}

void PublishDirectory(const std::filesystem::path& staged, const std::filesystem::path& target) {
  const std::filesystem::path parent = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  if (::rename(staged.c_str(), target.c_str()) != 0) {
    if (errno != EEXIST && errno != ENOTEMPTY) Fail("cannot rename " + staged.string() + " to", target);
    if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
      files::RemoveTree(staged);  // now holds the replaced directory
    } else {
      std::filesystem::path aside = target;
      aside += ".replaced";
      files::RemoveTree(aside);
      std::filesystem::rename(target, aside);
      std::filesystem::rename(staged, target);
      files::RemoveTree(aside);
    }
  }
  SyncDirectory(parent);
}

}  // namespace headroom::checkpoint
