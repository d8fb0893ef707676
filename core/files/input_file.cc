#include "core/files/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace headroom::files {
namespace {

[[noreturn]] void Fail(const std::string& path, const std::string& why) { throw InputFileError(path + ": " + why); }

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

void RequireRegular(const std::string& path, const struct stat& st, const std::string& what) {
  if (!S_ISREG(st.st_mode)) Fail(path, std::string("is ") + KindOf(st.st_mode) + ", expected " + what);
}

}  // namespace

std::string HumanBytes(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf,
                u == 0 || bytes == static_cast<double>(static_cast<long long>(bytes)) ? "%.0f %s" : "%.1f %s", bytes,
                units[u]);
  return buf;
}

void RequireRegularFile(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) Fail(path, std::string("cannot be read: ") + std::strerror(errno));
  RequireRegular(path, st, what);
}

int OpenRegularFile(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) Fail(path, std::string("cannot be read: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    Fail(path, std::string("cannot stat: ") + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    RequireRegular(path, st, what);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

std::string ReadWholeFile(const std::string& path, size_t limit, const std::string& what) {
  const int fd = OpenRegularFile(path, what);
  struct stat st {};
  ::fstat(fd, &st);
  if (static_cast<uint64_t>(st.st_size) > limit) {
    ::close(fd);
    Fail(path, HumanBytes(static_cast<double>(st.st_size)) + " is larger than the " +
                   HumanBytes(static_cast<double>(limit)) + " limit for " + what);
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      Fail(path, std::string("read failed: ") + std::strerror(e));
    }
    if (n == 0) break;  // shrank while being read: what is there
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return text;
}

}  // namespace headroom::files
