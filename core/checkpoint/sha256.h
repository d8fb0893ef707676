// SHA-256 (FIPS 180-4), the checksum a checkpoint records for each of its files.
//
// Why SHA-256 through OpenSSL: OpenSSL is linked already (cpprest needs it), its SHA-256
// uses the x86-64 SHA extensions where the CPU has them (AMD since Zen, Intel since Ice
// Lake; ~1.8 GB/s per core), it catches every truncation, bit flip and torn write, and a
// user can check a file by hand with `sha256sum`.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "core/base/non_copyable.h"

struct evp_md_ctx_st;

namespace headroom::checkpoint {

// A running hash: Update() any number of times; HexDigest() is the digest of everything
// so far (64 lowercase hex digits) and leaves the hash running.
class Sha256 : NonCopyable {
 public:
  Sha256();
  ~Sha256();

  void Update(const void* data, size_t size);
  std::string HexDigest() const;

 private:
  evp_md_ctx_st* ctx_;
};

// The SHA-256 of the whole file as stored: its cached pages are dropped first and while
// reading (POSIX_FADV_DONTNEED), so the bytes come from the storage device and the page
// cache is not charged to the caller's memory cgroup. Throws CheckpointError naming the
// file when it cannot be read.
std::string FileSha256(const std::filesystem::path& path);

}  // namespace headroom::checkpoint
