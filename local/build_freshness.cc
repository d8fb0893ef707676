#include "local/build_freshness.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "core/hf/hub_digest.h"

namespace headroom::local {
namespace fs = std::filesystem;

namespace {

constexpr const char* kStampName = "headroom.build-stamp";
constexpr const char* kRebuildHint = "run scripts/setup.sh to rebuild";

struct Stamp {
  fs::path source_dir;
  std::vector<std::string> dirs;
  std::vector<std::string> patterns;
  std::map<std::string, std::string> hashes;  // relative path -> sha256
};

std::vector<std::string> Words(std::istringstream& in) {
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

Stamp ReadStamp(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  Stamp stamp;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (number == 1) {
      std::string version;
      fields >> version;
      if (key != "headroom-build-stamp" || version != "1")
        throw std::runtime_error(path.string() + ":1: not a headroom build stamp (version 1)");
    } else if (key == "source-dir") {
      std::string rest;
      std::getline(fields >> std::ws, rest);
      stamp.source_dir = rest;
    } else if (key == "dirs") {
      stamp.dirs = Words(fields);
    } else if (key == "patterns") {
      stamp.patterns = Words(fields);
    } else if (key.size() == 64) {
      std::string rel;
      std::getline(fields >> std::ws, rel);
      stamp.hashes[rel] = key;
    } else if (!key.empty()) {
      throw std::runtime_error(path.string() + ":" + std::to_string(number) + ": unexpected '" + key + "'");
    }
  }
  if (stamp.source_dir.empty()) throw std::runtime_error(path.string() + ": no source-dir line");
  return stamp;
}

// The glob patterns cmake/build_stamp.cmake uses: "*.ext" or an exact file name.
bool Matches(const std::string& name, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns) {
    if (p.size() > 1 && p[0] == '*') {
      const std::string suffix = p.substr(1);
      if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        return true;
    } else if (name == p) {
      return true;
    }
  }
  return false;
}

std::string Summarise(const std::vector<std::string>& names, const char* what) {
  std::string text;
  const size_t shown = std::min<size_t>(names.size(), 3);
  for (size_t i = 0; i < shown; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > shown) text += " and " + std::to_string(names.size() - shown) + " more";
  return text + " " + what;
}

}  // namespace

BuildFreshness CheckBuildFreshness(const fs::path& bin_dir, const std::vector<std::string>& binaries) {
  std::error_code ec;
  const fs::path stamp_path = bin_dir / kStampName;
  const bool in_build_tree = fs::exists(bin_dir.parent_path() / "CMakeCache.txt", ec);
  if (!fs::exists(stamp_path, ec)) {
    if (!in_build_tree) return {};  // installed binaries: nothing to compare against
    return {false, "the build in " + bin_dir.parent_path().string() + " did not finish (no " + kStampName + "); " +
                       kRebuildHint};
  }
  const auto stamp_time = fs::last_write_time(stamp_path, ec);
  for (const auto& name : binaries) {
    const fs::path binary = bin_dir / name;
    if (!fs::exists(binary, ec))
      return {false, "the build in " + bin_dir.parent_path().string() + " has no " + name + "; " + kRebuildHint};
    if (fs::last_write_time(binary, ec) > stamp_time)
      return {false, "the build in " + bin_dir.parent_path().string() + " did not finish (" + name +
                         " is newer than its " + kStampName + "); " + kRebuildHint};
  }
  Stamp stamp;
  try {
    stamp = ReadStamp(stamp_path);
  } catch (const std::exception& e) {
    return {false, std::string(e.what()) + "; " + kRebuildHint};
  }
  if (!fs::is_directory(stamp.source_dir, ec)) return {};  // binaries moved away from their sources

  std::vector<std::string> changed, removed, added;
  for (const auto& [rel, hash] : stamp.hashes) {
    const fs::path file = stamp.source_dir / rel;
    if (!fs::exists(file, ec)) {
      removed.push_back(rel);
      continue;
    }
    try {
      if (hf::FileSha256(file.string()) != hash) changed.push_back(rel);
    } catch (const std::exception&) {
      changed.push_back(rel);
    }
  }
  for (const auto& dir : stamp.dirs) {
    const fs::path root = stamp.source_dir / dir;
    if (!fs::is_directory(root, ec)) continue;
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (!it->is_regular_file(ec) || !Matches(it->path().filename().string(), stamp.patterns)) continue;
      const std::string rel = fs::relative(it->path(), stamp.source_dir, ec).string();
      if (!stamp.hashes.count(rel)) added.push_back(rel);
    }
  }
  if (changed.empty() && removed.empty() && added.empty()) return {};
  std::string what;
  auto append = [&](const std::vector<std::string>& names, const char* verb) {
    if (names.empty()) return;
    if (!what.empty()) what += "; ";
    what += Summarise(names, verb);
  };
  append(changed, "changed");
  append(added, "added");
  append(removed, "removed");
  return {false, "the build in " + bin_dir.parent_path().string() + " is stale: " + what + " since it was built; " +
                     kRebuildHint};
}

}  // namespace headroom::local
