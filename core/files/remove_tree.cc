#include "core/files/remove_tree.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

namespace headroom::files {
namespace {

// nftw's callback has no user pointer; the first failure is kept per thread.
thread_local int failed_errno = 0;
thread_local std::string* failed_path = nullptr;

int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  const int rc = (type == FTW_DP) ? ::rmdir(path) : ::unlink(path);
  if (rc != 0 && errno != ENOENT) {
    failed_errno = errno;
    if (failed_path != nullptr) *failed_path = path;
    return 1;  // stop the walk
  }
  return 0;
}

}  // namespace

bool RemoveTree(const std::filesystem::path& p, std::error_code& ec) noexcept {
  ec.clear();
  struct stat st;
  if (::lstat(p.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;
    ec.assign(errno, std::generic_category());
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) {
      ec.assign(errno, std::generic_category());
      return false;
    }
    return true;
  }
  failed_errno = 0;
  // Depth first (children before their directory), physical (links not followed), within
  // 64 open descriptors.
  const int rc = ::nftw(p.c_str(), RemoveEntry, 64, FTW_DEPTH | FTW_PHYS);
  if (rc != 0) {
    ec.assign(failed_errno != 0 ? failed_errno : errno, std::generic_category());
    return false;
  }
  return true;
}

void RemoveTree(const std::filesystem::path& p) {
  std::error_code ec;
  std::string where = p.string();
  failed_path = &where;
  const bool ok = RemoveTree(p, ec);
  failed_path = nullptr;
  if (!ok) throw std::filesystem::filesystem_error("cannot remove " + where, p, ec);
}

}  // namespace headroom::files
