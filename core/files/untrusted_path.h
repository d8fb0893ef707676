// Names that come from outside the program and become paths (docs/design.md, "Untrusted
// inputs"): shard names in a model.safetensors.index.json, a Hub's ETags and revision
// listings, the revision a spec names for refs/. Every such name is checked here, before
// it is joined to a directory, by one rule:
//   - a relative path below the directory: not empty, not absolute, no "." or ".."
//     component, no empty component ("a//b"), no NUL, control character or backslash;
//   - a file name (an ETag, a commit) is one such component: no '/' at all;
//   - below a directory whose contents may hold links (the Hub cache), the path resolved
//     (existing links followed) must still lie inside the directory it belongs to.
// The message names the bad name and why; the caller adds whose name it was (the
// repository, the file that named it).
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

namespace headroom::files {

// A bad name from outside is bad input (exit 2), never something to retry.
class UntrustedPathError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// "" when `name` is a relative path that stays below the directory it is joined to, else
// why not ("is absolute", "has a '..' component", ...).
std::string WhyNotRelativeBelow(const std::string& name);

// "" when `name` is one path component (WhyNotRelativeBelow and no '/'), else why not.
std::string WhyNotFileName(const std::string& name);

// `root / name` once `name` passes WhyNotRelativeBelow and the longest existing part of
// the result, links followed, lies inside `root` (links followed too). Throws
// UntrustedPathError "\"NAME\" WHY" otherwise (the name quoted as JSON, so control
// characters stay visible and on one line).
std::filesystem::path PathBelow(const std::filesystem::path& root, const std::string& name);

// `name` quoted as a JSON string: how a bad name is shown in a message.
std::string Quoted(const std::string& name);

}  // namespace headroom::files
