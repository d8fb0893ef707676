#include "core/checkpoint/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/checkpoint/checkpoint_error.h"

namespace headroom::checkpoint {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
    throw CheckpointError("SHA-256 is unavailable in this OpenSSL");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::Update(const void* data, size_t size) {
  if (EVP_DigestUpdate(ctx_, data, size) != 1) throw CheckpointError("SHA-256: update failed");
}

std::string Sha256::HexDigest() const {
  EVP_MD_CTX* copy = EVP_MD_CTX_new();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  const bool ok = copy && EVP_MD_CTX_copy_ex(copy, ctx_) == 1 && EVP_DigestFinal_ex(copy, digest, &length) == 1;
  EVP_MD_CTX_free(copy);
  if (!ok) throw CheckpointError("SHA-256: finishing the digest failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

std::string FileSha256(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CheckpointError("cannot open " + path.string() + ": " + std::strerror(errno));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // best effort: only the source of the bytes changes
  Sha256 hash;
  std::vector<char> buffer(size_t{4} << 20);
  off_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buffer.data(), buffer.size(), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw CheckpointError("cannot read " + path.string() + ": " + std::strerror(err));
    }
    if (n == 0) break;
    hash.Update(buffer.data(), static_cast<size_t>(n));
    ::posix_fadvise(fd, offset, n, POSIX_FADV_DONTNEED);
    offset += n;
  }
  ::close(fd);
  return hash.HexDigest();
}

}  // namespace headroom::checkpoint
