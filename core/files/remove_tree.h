// Removing a directory tree (rm -rf) without std::filesystem::remove_all.
//
// Why: a PyTorch wheel's LibTorch (2.5 and later) exports its own statically linked copy of
// libstdc++'s std::filesystem::recursive_directory_iterator, the iterator remove_all walks
// with. In a binary linked against such a LibTorch the two copies mix, and remove_all
// crashed (checkpoint rotation, scratch directories) in the CUDA build. These functions walk
// the tree with POSIX nftw() instead, which nothing else exports.
//
// Contract:
//   - RemoveTree(p) removes p and everything under it; symbolic links are removed, never
//     followed (what they point to stays). A path that does not exist is not an error.
//   - The throwing form raises std::filesystem::filesystem_error naming the entry it could
//     not remove; the error_code form returns false and sets ec instead, and never throws.
#pragma once

#include <filesystem>
#include <system_error>

namespace headroom::files {

void RemoveTree(const std::filesystem::path& p);
bool RemoveTree(const std::filesystem::path& p, std::error_code& ec) noexcept;

}  // namespace headroom::files
