// The checksums a Hugging Face Hub publishes for a file, computed over a file on disk:
// an LFS file's X-Linked-Etag is the sha256 of its contents; a small (non-LFS) file's
// ETag is its git blob id, sha1("blob <size>\0" + contents).
#pragma once

#include <string>

namespace headroom::hf {

// Lowercase hex sha256 of the file's contents; throws std::runtime_error when unreadable.
std::string FileSha256(const std::string& path);

// Lowercase hex git blob sha1 of the file; throws std::runtime_error when unreadable.
std::string FileGitBlobSha1(const std::string& path);

}  // namespace headroom::hf
