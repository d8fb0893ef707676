// Test support: a local Hugging Face Hub, following its HTTP API as huggingface_hub uses
// it, on two loopback listeners: the hub (revision API, HEAD/GET resolve/<rev>/<file>) and
// a content host on another port that the hub's 302s for LFS files point to (as the real
// hub points to its CDN). Headers as the hub sends them: X-Repo-Commit, ETag (a git blob
// sha1 for small files), X-Linked-Etag (sha256) and X-Linked-Size for LFS files,
// X-Error-Code on 404s; Range requests answer 206. It can require a token, cut one
// download short after N bytes (a complete but short response), redirect LFS downloads to
// another host (tests/helpers/dropping_http_host.h drops a connection mid-body), and serve
// corrupt bytes, and it records every request.
#pragma once

#include <cpprest/http_listener.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/hf/hub_digest.h"
#include "core/net/free_port.h"

namespace headroom::testing {

struct HubRequestSeen {
  std::string listener;  // "hub" or "content"
  std::string method;
  std::string path;
  std::string authorization;  // "" when none was sent
  std::string range;
};

struct HubTestFile {
  std::string contents;
  bool lfs = false;  // served through a 302 to the content host
};

class HubTestServer {
 public:
  // `repo` ("org/name") at `commit`, reachable as "main" and as the commit itself.
  HubTestServer(std::string repo, std::string commit, std::map<std::string, HubTestFile> files)
      : repo_(std::move(repo)), commit_(std::move(commit)), files_(std::move(files)) {
    hub_ = Open("hub");
    content_ = Open("content");
  }
  ~HubTestServer() {
    for (auto* l : {hub_.get(), content_.get()}) {
      try {
        l->close().wait();
      } catch (...) {
      }
    }
  }

  // The hub's own files from a model directory (every regular file in it); *.safetensors are LFS.
  static std::map<std::string, HubTestFile> FilesFrom(const std::string& dir) {
    std::map<std::string, HubTestFile> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      const std::string name = entry.path().filename().string();
      files[name] = {text.str(), name.size() > 12 && name.substr(name.size() - 12) == ".safetensors"};
    }
    return files;
  }

  std::string endpoint() const { return hub_url_; }
  std::string content_url() const { return content_url_; }
  void RequireToken(const std::string& token) {
    Locked([&] { token_ = token; });
  }
  // The next download from the content host stops after `bytes` bytes (the body ends early).
  void CutNextDownloadAfter(int64_t bytes) {
    Locked([&] { cut_after_ = bytes; });
  }
  // LFS files redirect to this content host instead of the server's own (e.g. a
  // DroppingHttpHost serving LfsContent()); "" restores the own one.
  void RedirectLfsTo(const std::string& url) {
    Locked([&] { lfs_host_ = url; });
  }
  // What the content host serves: "/lfs/<sha256>/<name>" -> the LFS file's bytes.
  std::map<std::string, std::string> LfsContent() const {
    std::map<std::string, std::string> paths;
    for (const auto& [name, file] : files_) {
      if (file.lfs) paths["/lfs/" + Sha256(file.contents) + "/" + name] = file.contents;
    }
    return paths;
  }
  // Content downloads serve these bytes instead of the file's (a checksum mismatch).
  void CorruptContent(bool corrupt) {
    Locked([&] { corrupt_ = corrupt; });
  }
  // The next `n` requests to the hub listener answer `code` (a 500: the hub unavailable).
  void FailNextHubRequests(int n, int code = 500) {
    Locked([&] {
      fail_next_ = n;
      fail_code_ = code;
    });
  }
  // Every content download answers 302 to itself (a redirect loop on the CDN).
  void RedirectContentToItself(bool on) {
    Locked([&] { content_loops_ = on; });
  }
  // The file's ETag (X-Linked-Etag for an LFS file) as the hub sends it, unquoted.
  void OverrideEtag(const std::string& file, const std::string& etag) {
    Locked([&] { etags_[file] = etag; });
  }
  std::vector<HubRequestSeen> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

  static std::string Sha256(const std::string& text) { return Digest(text, false); }
  static std::string GitBlobSha1(const std::string& text) { return Digest(text, true); }

 private:
  using listener_t = web::http::experimental::listener::http_listener;

  template <typename F>
  void Locked(F f) {
    std::lock_guard<std::mutex> lock(mu_);
    f();
  }

  static std::string Digest(const std::string& text, bool git) {
    const std::string path =
        std::filesystem::temp_directory_path() /
        ("hub_test_digest_" + std::to_string(::getpid()) + "_" + std::to_string(std::hash<std::string>{}(text)));
    std::ofstream(path, std::ios::binary) << text;
    const std::string hex = git ? hf::FileGitBlobSha1(path) : hf::FileSha256(path);
    std::filesystem::remove(path);
    return hex;
  }

  std::unique_ptr<listener_t> Open(const std::string& which) {
    std::string last_error;
    for (int attempt = 0; attempt < 20; ++attempt) {
      const std::string url = "http://127.0.0.1:" + std::to_string(net::FreePort());
      auto listener = std::make_unique<listener_t>(url);
      listener->support([this, which](web::http::http_request req) { Route(which, std::move(req)); });
      try {
        listener->open().wait();
        (which == "hub" ? hub_url_ : content_url_) = url;
        return listener;
      } catch (const std::exception& e) {
        last_error = e.what();
      }
    }
    throw std::runtime_error("hub test server could not listen: " + last_error);
  }

  static std::vector<std::string> Split(const std::string& path) {
    std::vector<std::string> parts;
    std::string part;
    std::stringstream in(path);
    while (std::getline(in, part, '/')) {
      if (!part.empty()) parts.push_back(web::uri::decode(part));
    }
    return parts;
  }

  void Route(const std::string& which, web::http::http_request req) {
    HubRequestSeen seen{which, req.method(), req.relative_uri().path()};
    req.headers().match(web::http::header_names::authorization, seen.authorization);
    req.headers().match("Range", seen.range);
    Locked([&] { requests_.push_back(seen); });
    web::http::http_response r;
    int fail = 0;
    Locked([&] {
      if (which == "hub" && fail_next_ > 0) {
        --fail_next_;
        fail = fail_code_;
      }
    });
    try {
      r = fail != 0        ? web::http::http_response(static_cast<web::http::status_code>(fail))
          : which == "hub" ? Hub(seen)
                           : Content(seen);
    } catch (const std::exception& e) {
      r = web::http::http_response(500);
      r.set_body(std::string(e.what()));
    }
    req.reply(r).wait();
  }

  web::http::http_response NotFound(const std::string& code) const {
    web::http::http_response r(404);
    r.headers().add("X-Error-Code", code);
    r.set_body(std::string(code));
    return r;
  }

  // The repository part of a path: the first two parts must be repo_ ("org/name").
  bool IsRepo(const std::vector<std::string>& parts, size_t at) const {
    return parts.size() >= at + 2 && parts[at] + "/" + parts[at + 1] == repo_;
  }
  bool IsRevision(const std::string& rev) const { return rev == "main" || rev == commit_; }

  web::http::http_response Hub(const HubRequestSeen& seen) {
    std::string token;
    Locked([&] { token = token_; });
    if (!token.empty() && seen.authorization != "Bearer " + token) {
      web::http::http_response r(401);
      r.set_body(std::string("Invalid credentials in Authorization header"));
      return r;
    }
    const std::vector<std::string> parts = Split(seen.path);
    if (parts.size() == 6 && parts[0] == "api" && parts[1] == "models" && parts[4] == "revision") {
      if (!IsRepo(parts, 2)) return NotFound("RepoNotFound");
      if (!IsRevision(parts[5])) return NotFound("RevisionNotFound");
      nlohmann::json j = {{"id", repo_}, {"sha", commit_}, {"siblings", nlohmann::json::array()}};
      for (const auto& [name, file] : files_) j["siblings"].push_back({{"rfilename", name}});
      web::http::http_response r(200);
      r.set_body(j.dump(), "application/json");
      return r;
    }
    if (parts.size() >= 5 && parts[2] == "resolve") {
      if (!IsRepo(parts, 0)) return NotFound("RepoNotFound");
      if (!IsRevision(parts[3])) return NotFound("RevisionNotFound");
      const auto file = files_.find(parts[4]);
      if (file == files_.end()) return NotFound("EntryNotFound");
      return Resolve(seen, file->first, file->second);
    }
    return NotFound("RepoNotFound");
  }

  web::http::http_response Resolve(const HubRequestSeen& seen, const std::string& name, const HubTestFile& file) {
    if (file.lfs) {
      web::http::http_response r(302);
      const std::string sha = Sha256(file.contents);
      std::string host;
      Locked([&] { host = lfs_host_.empty() ? content_url_ : lfs_host_; });
      r.headers().add("Location", host + "/lfs/" + sha + "/" + name);
      r.headers().add("X-Repo-Commit", commit_);
      r.headers().add("X-Linked-Etag", "\"" + EtagOf(name, sha) + "\"");
      r.headers().add("X-Linked-Size", std::to_string(file.contents.size()));
      r.headers().add("ETag", "\"" + GitBlobSha1("pointer " + sha) + "\"");
      return r;
    }
    web::http::http_response r = Body(seen, file.contents);
    r.headers().add("X-Repo-Commit", commit_);
    r.headers().add("ETag", "\"" + EtagOf(name, GitBlobSha1(file.contents)) + "\"");
    return r;
  }

  std::string EtagOf(const std::string& name, const std::string& real) {
    std::string etag = real;
    Locked([&] {
      if (const auto it = etags_.find(name); it != etags_.end()) etag = it->second;
    });
    return etag;
  }

  web::http::http_response Content(const HubRequestSeen& seen) {
    bool loops = false;
    Locked([&] { loops = content_loops_; });
    if (loops) {
      web::http::http_response r(302);
      r.headers().add("Location", content_url_ + seen.path);
      return r;
    }
    const std::vector<std::string> parts = Split(seen.path);
    for (const auto& [name, file] : files_) {
      if (parts.size() == 3 && parts[0] == "lfs" && parts[1] == Sha256(file.contents) && parts[2] == name) {
        std::string bytes = file.contents;
        Locked([&] {
          if (corrupt_) bytes.assign(bytes.size(), 'x');
        });
        return Body(seen, bytes, /*may_cut=*/true);
      }
    }
    return NotFound("EntryNotFound");
  }

  // 200 with the bytes, or 206 from a "bytes=N-" Range; with `may_cut`, a pending cut
  // serves only a prefix.
  web::http::http_response Body(const HubRequestSeen& seen, const std::string& bytes, bool may_cut = false) {
    int64_t from = 0;
    if (seen.range.rfind("bytes=", 0) == 0) from = std::stoll(seen.range.substr(6));
    if (from > static_cast<int64_t>(bytes.size())) return web::http::http_response(416);
    std::string body = bytes.substr(static_cast<size_t>(from));
    if (may_cut && seen.method == web::http::methods::GET) {
      Locked([&] {
        if (cut_after_ >= 0 && cut_after_ < static_cast<int64_t>(body.size()))
          body.resize(static_cast<size_t>(cut_after_));
        cut_after_ = -1;
      });
    }
    web::http::http_response r(from > 0 ? 206 : 200);
    if (from > 0) {
      r.headers().add("Content-Range", "bytes " + std::to_string(from) + "-" + std::to_string(bytes.size() - 1) + "/" +
                                           std::to_string(bytes.size()));
    }
    r.set_body(std::vector<unsigned char>(body.begin(), body.end()));
    return r;
  }

  std::string repo_, commit_;
  std::map<std::string, HubTestFile> files_;
  std::unique_ptr<listener_t> hub_, content_;
  std::string hub_url_, content_url_;
  mutable std::mutex mu_;
  std::string token_;
  std::string lfs_host_;
  int64_t cut_after_ = -1;
  bool corrupt_ = false;
  int fail_next_ = 0;
  int fail_code_ = 500;
  bool content_loops_ = false;
  std::map<std::string, std::string> etags_;
  std::vector<HubRequestSeen> requests_;
};

}  // namespace headroom::testing
