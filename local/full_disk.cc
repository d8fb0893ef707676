#include "local/full_disk.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/base/human_bytes.h"
#include "core/checkpoint/checkpoint_layout.h"

namespace headroom::local {

namespace fs = std::filesystem;

namespace {

std::optional<dev_t> DeviceOf(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return std::nullopt;
  return st.st_dev;
}

uint64_t BytesUnder(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

// The absolute paths a message names ("/a/b" up to a blank, quote, bracket, comma or
// semicolon; a trailing ':' or '.' dropped).
std::vector<std::string> PathsIn(const std::string& text) {
  std::vector<std::string> paths;
  for (size_t at = 0; (at = text.find('/', at)) != std::string::npos;) {
    if (at > 0 && text[at - 1] != ' ' && text[at - 1] != '(' && text[at - 1] != '"' && text[at - 1] != '\'') {
      at = text.find_first_of(" \t\n", at);
      if (at == std::string::npos) break;
      continue;
    }
    size_t end = text.find_first_of(" \t\n\"'(),;", at);
    if (end == std::string::npos) end = text.size();
    std::string path = text.substr(at, end - at);
    while (!path.empty() && (path.back() == ':' || path.back() == '.')) path.pop_back();
    if (path.size() > 1) paths.push_back(path);
    at = end;
  }
  return paths;
}

}  // namespace

std::optional<FilesystemSpace> SpaceOf(const std::string& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  while (!DeviceOf(p) && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  const std::optional<dev_t> device = DeviceOf(p);
  struct statvfs vfs {};
  if (!device || ::statvfs(p.c_str(), &vfs) != 0) return std::nullopt;
  while (p.has_parent_path() && p != p.parent_path() && DeviceOf(p.parent_path()) == device) p = p.parent_path();
  return FilesystemSpace{p.string(), static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize};
}

std::string FullDiskNote(const std::string& workdir, const std::vector<std::string>& failures, bool failed) {
  const std::string checkpoints = workdir + "/checkpoints";
  std::optional<fs::path> latest;
  try {
    latest = checkpoint::LatestCheckpoint(checkpoints);
  } catch (const std::exception&) {
    // A malformed `latest` is the resume's to report; here it only means no step is known.
  }
  const uint64_t step_bytes = latest ? BytesUnder(*latest) : 0;
  const std::optional<FilesystemSpace> space = SpaceOf(workdir);
  bool full = false;
  // The filesystem that filled is the one the failure names (the Hugging Face cache, say),
  // when that is not the workdir's.
  std::string elsewhere;
  std::optional<FilesystemSpace> elsewhere_space;
  for (const std::string& f : failures) {
    if (f.find(std::strerror(ENOSPC)) == std::string::npos && f.find(std::strerror(EDQUOT)) == std::string::npos) {
      continue;
    }
    full = true;
    for (const std::string& path : PathsIn(f)) {
      const std::optional<FilesystemSpace> named = SpaceOf(path);
      if (!elsewhere_space && named && (!space || named->mount_point != space->mount_point)) {
        elsewhere = path;
        elsewhere_space = named;
      }
    }
  }
  if (failed && latest && space && space->free_bytes < step_bytes) full = true;
  if (!full) return "";

  const std::optional<int64_t> step = latest ? checkpoint::ParseStepDirName(latest->filename().string()) : std::nullopt;
  auto free_text = [](const std::optional<FilesystemSpace>& s) {
    return s ? HumanBytes(static_cast<double>(s->free_bytes)) : std::string("?");
  };
  std::string note;
  if (elsewhere_space) {
    note = "disk full: " + elsewhere + " is on the filesystem at " + elsewhere_space->mount_point + " with " +
           free_text(elsewhere_space) + " free (not the workdir's: " + workdir + " has " + free_text(space) + " free)";
  } else {
    note = "disk full: " + workdir + " is on the filesystem at " + (space ? space->mount_point : "?") + " with " +
           free_text(space) + " free";
    if (step_bytes > 0) note += " (a checkpoint takes " + HumanBytes(static_cast<double>(step_bytes)) + ")";
  }
  note += step ? "; kept: the checkpoint at step " + std::to_string(*step) + " in " + checkpoints
               : "; no checkpoint was saved yet";
  return note + (elsewhere_space ? "; free space there" : "; free space there (or use another --workdir)") +
         " and run the same command again to " + (step ? "resume from step " + std::to_string(*step) : "start");
}

}  // namespace headroom::local
