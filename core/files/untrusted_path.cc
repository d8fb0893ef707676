#include "core/files/untrusted_path.h"

#include <cstdio>

namespace headroom::files {

namespace fs = std::filesystem;

std::string Quoted(const std::string& name) {
  std::string out = "\"";
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", u);
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string WhyNotRelativeBelow(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.front() == '/') return "is an absolute path";
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return "has a control character";
    if (c == '\\') return "has a backslash";
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    const std::string part = name.substr(start, end - start);
    if (part.empty()) return "has an empty component";
    if (part == "..") return "has a '..' component";
    if (part == ".") return "has a '.' component";
    start = end + 1;
  }
  return "";
}

std::string WhyNotFileName(const std::string& name) {
  if (std::string why = WhyNotRelativeBelow(name); !why.empty()) return why;
  if (name.find('/') != std::string::npos) return "has a '/'";
  return "";
}

namespace {

// `p` with every existing leading part resolved (links followed), the rest appended.
fs::path Resolved(const fs::path& p) {
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : resolved;
}

bool Inside(const fs::path& path, const fs::path& root) {
  auto r = root.begin();
  auto p = path.begin();
  for (; r != root.end(); ++r, ++p) {
    if (r->empty()) continue;  // a trailing '/'
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

}  // namespace

fs::path PathBelow(const fs::path& root, const std::string& name) {
  if (std::string why = WhyNotRelativeBelow(name); !why.empty()) throw UntrustedPathError(Quoted(name) + " " + why);
  const fs::path joined = root / name;
  const fs::path real_root = Resolved(fs::absolute(root));
  if (!Inside(Resolved(fs::absolute(joined)), real_root)) {
    throw UntrustedPathError(Quoted(name) + " leads out of " + root.string() + " through a link");
  }
  return joined;
}

}  // namespace headroom::files
