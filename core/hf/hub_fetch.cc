#include "core/hf/hub_fetch.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <vector>

#include "core/base/non_copyable.h"
#include "core/files/input_file.h"
#include "core/files/untrusted_path.h"
#include "core/hf/hub_cache.h"
#include "core/hf/hub_digest.h"
#include "core/hf/hub_http.h"
#include "core/hf/hub_reference.h"
#include "core/hf/weight_index.h"

namespace headroom::hf {
namespace fs = std::filesystem;
namespace http = web::http;

namespace {

// The files besides the weights that a worker reads when the repository has them.
const char* const kOptionalFiles[] = {"generation_config.json", "tokenizer.json", "tokenizer_config.json",
                                      "special_tokens_map.json"};
const char* const kSingleWeights = "model.safetensors";
const char* const kWeightsIndex = kWeightsIndexFileName;

// Holds an exclusive flock on a file under the cache's .locks/ for its lifetime.
class CacheLock : NonCopyable {
 public:
  explicit CacheLock(const fs::path& path) {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) throw HubFetchError("cannot open the lock file " + path.string() + ": " + std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) throw HubFetchError("cannot lock " + path.string() + ": " + std::strerror(errno));
    }
  }
  ~CacheLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }

 private:
  int fd_ = -1;
};

// What the hub says about one file of the commit (the HEAD of its resolve URL).
struct FileMeta {
  std::string name;
  std::string etag;  // X-Linked-Etag (LFS: the sha256) else ETag (the git blob sha1)
  int64_t size = 0;  // X-Linked-Size else Content-Length
  bool lfs = false;
  std::string download_url;  // the 302's content URL, else the resolve URL
};

// One fetch: the options, the connection and the running byte counts.
class Fetch {
 public:
  explicit Fetch(const HubFetchOptions& o)
      : o_(o), http_(o.endpoint, o.token, o.timeout), repo_dir_(fs::path(o.cache_dir) / HubRepoFolderName(o.repo)) {}

  std::string Run();

 private:
  std::string Prefix() const { return o_.repo + "@" + o_.revision + ": "; }
  http::http_response Send(const http::method& m, const std::string& url, const std::string& what, int64_t from = 0);
  // GET of a download URL, following its redirects.
  http::http_response Get(const FileMeta& meta, int64_t from);
  void CheckStatus(const http::http_response& r, const std::string& what) const;
  std::string Unreachable(const std::exception& e, const std::string& host) const;
  [[noreturn]] void RedirectLoop(const std::string& what, const std::string& url, const std::string& location) const;
  fs::path Below(const std::string& name, const std::string& file) const;
  std::set<std::string> ListRevision();
  FileMeta Head(const std::string& file);
  void Download(const FileMeta& meta, const fs::path& incomplete);
  void AppendBody(http::http_response& r, const FileMeta& meta, const fs::path& incomplete, bool restart);
  [[noreturn]] void WriteFailed(int error, const FileMeta& meta, const fs::path& incomplete) const;
  void WriteRef() const;
  void Verify(const FileMeta& meta, const fs::path& incomplete) const;
  void Place(const FileMeta& meta);
  std::vector<std::string> Shards();
  void Report(const std::string& file) const {
    if (o_.progress) o_.progress({file, done_, total_});
  }

  const HubFetchOptions& o_;
  HubHttp http_;
  fs::path repo_dir_;
  std::string commit_;
  int64_t done_ = 0;
  int64_t total_ = 0;
};

std::string NormalizeEtag(std::string etag) {
  if (etag.rfind("W/", 0) == 0) etag.erase(0, 2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return etag;
}

int64_t ParseSize(const std::string& text) {
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  return text.empty() || *end != '\0' || value < 0 ? -1 : value;
}

// A hub that cannot answer now (its 5xx, a rate limit's 429): worth asking again.
bool Unavailable(int code) { return code >= 500 || code == 429; }

std::string Fetch::Unreachable(const std::exception& e, const std::string& host) const {
  if (HubHttp::TimedOut(e)) return "no answer from " + host + " within " + std::to_string(o_.timeout.count()) + " s";
  return "cannot reach " + host + ": " + e.what();
}

// One request, tried again with a doubling wait while the hub is unavailable (no
// connection, a reset, a stall, a 5xx or 429); any other answer is returned at once.
http::http_response Fetch::Send(const http::method& m, const std::string& url, const std::string& what, int64_t from) {
  std::chrono::milliseconds delay = o_.retry_delay;
  for (int attempt = 1;; ++attempt) {
    try {
      http::http_response r = http_.Send(m, url, from);
      if (!Unavailable(r.status_code()) || attempt >= o_.request_attempts) return r;
    } catch (const std::exception& e) {
      if (attempt >= o_.request_attempts) {
        throw HubUnavailableError(Prefix() + what + ": " + Unreachable(e, web::uri(url).host()) + " (" +
                                  std::to_string(attempt) + " tries)");
      }
    }
    std::this_thread::sleep_for(delay);
    delay *= 2;
  }
}

void Fetch::RedirectLoop(const std::string& what, const std::string& url, const std::string& location) const {
  throw HubUnavailableError(Prefix() + what + ": redirect loop: more than " + std::to_string(o_.max_redirects) +
                            " redirects, the last from " + web::uri(url).host() + " to " + location);
}

// `name` below the repository's cache folder, checked (core/files/untrusted_path.h).
fs::path Fetch::Below(const std::string& name, const std::string& file) const {
  try {
    return files::PathBelow(repo_dir_, name);
  } catch (const files::UntrustedPathError& e) {
    throw HubFetchError(Prefix() + file + ": the cache path " + e.what());
  }
}

// Redirects are answered by the caller (Head, Get); here only 2xx is a success.
void Fetch::CheckStatus(const http::http_response& r, const std::string& what) const {
  const int code = r.status_code();
  if (code >= 200 && code < 300) return;
  const std::string head =
      Prefix() + what + ": " + std::to_string(code) + " " + r.reason_phrase() + " from " + web::uri(o_.endpoint).host();
  if (Unavailable(code)) {
    throw HubUnavailableError(head + " (" + std::to_string(o_.request_attempts) +
                              " tries; the hub is unavailable, not the request wrong: try again later)");
  }
  if (code >= 300 && code < 400) throw HubFetchError(head + " (a redirect without a usable Location)");
  if (code == 401 || code == 403) {
    throw HubFetchError(head + (o_.token.empty() ? " (HF_TOKEN is not set: a private or gated repository needs one)"
                                                 : " (the HF_TOKEN given was refused)"));
  }
  if (code == 404) {
    const std::string kind = HeaderValue(r, "X-Error-Code");
    if (kind == "RevisionNotFound")
      throw HubFetchError(head + " (no revision \"" + o_.revision + "\" in " + o_.repo + ")");
    if (kind == "EntryNotFound") throw HubFetchError(head + " (no such file in the repository)");
    throw HubFetchError(head + " (no repository " + o_.repo + ", or it is private" +
                        (o_.token.empty() ? " and HF_TOKEN is not set)" : ")"));
  }
  throw HubFetchError(head);
}

// GET /api/models/<repo>/revision/<revision>: the commit (sha) and the file names (siblings).
std::set<std::string> Fetch::ListRevision() {
  const std::string url =
      o_.endpoint + "/api/models/" + o_.repo + "/revision/" + web::uri::encode_data_string(o_.revision);
  http::http_response r = Send(http::methods::GET, url, "listing the revision");
  CheckStatus(r, "listing the revision");
  const nlohmann::json j = nlohmann::json::parse(r.extract_utf8string(true).get(), nullptr, false);
  if (j.is_discarded() || !j.contains("sha") || !j["sha"].is_string() || !IsHubCommitId(j["sha"].get<std::string>())) {
    throw HubFetchError(Prefix() + "the revision listing from " + web::uri(o_.endpoint).host() +
                        " has no commit (sha)");
  }
  commit_ = j["sha"].get<std::string>();
  std::set<std::string> files;
  if (j.contains("siblings") && j["siblings"].is_array()) {
    for (const auto& s : j["siblings"]) {
      if (s.contains("rfilename") && s["rfilename"].is_string()) files.insert(s["rfilename"].get<std::string>());
    }
  }
  return files;
}

// HEAD resolve/<commit>/<file>: relative redirects are followed (the hub's own renames),
// an absolute one is the content URL and is where the bytes come from.
FileMeta Fetch::Head(const std::string& file) {
  FileMeta meta{file};
  std::string url = o_.endpoint + "/" + o_.repo + "/resolve/" + commit_ + "/" + file;
  http::http_response r;
  for (int hop = 0;; ++hop) {
    r = Send(http::methods::HEAD, url, file);
    const std::string location = HeaderValue(r, "Location");
    if (r.status_code() < 300 || r.status_code() >= 400 || location.empty()) break;
    if (location.rfind('/', 0) != 0) {
      meta.download_url = location;
      break;
    }
    if (hop == o_.max_redirects) RedirectLoop(file, url, location);
    url = HubHttp::Absolute(url, location);
  }
  if (meta.download_url.empty()) {
    CheckStatus(r, file);
    meta.download_url = url;
  }
  const std::string linked = HeaderValue(r, "X-Linked-Etag");
  meta.lfs = !linked.empty();
  meta.etag = NormalizeEtag(meta.lfs ? linked : HeaderValue(r, "ETag"));
  meta.size = ParseSize(HeaderValue(r, meta.lfs ? "X-Linked-Size" : "Content-Length"));
  if (meta.etag.empty() || meta.size < 0) {
    throw HubFetchError(Prefix() + file + ": the hub's answer has no usable ETag or size");
  }
  // The ETag names the file's blob in the cache: a name from outside, checked as one.
  if (std::string why = files::WhyNotFileName(meta.etag); !why.empty()) {
    throw HubFetchError(Prefix() + file + ": the hub's ETag " + files::Quoted(meta.etag) + " " + why +
                        " (it must be a file name in the cache's blobs/)");
  }
  return meta;
}

// What is written stays in `incomplete`, a prefix of the file: the next fetch resumes from
// it (as huggingface_hub keeps its .incomplete files).
void Fetch::WriteFailed(int error, const FileMeta& meta, const fs::path& incomplete) const {
  std::error_code ec;
  const auto kept = fs::exists(incomplete, ec) ? static_cast<int64_t>(fs::file_size(incomplete, ec)) : 0;
  const std::string where = std::to_string(kept) + " of " + std::to_string(meta.size) + " bytes kept in " +
                            incomplete.string() + " to resume";
  if (error == ENOSPC || error == EDQUOT) {
    throw HubFetchError(Prefix() + meta.name + ": the cache " + o_.cache_dir + " is full (" + std::strerror(error) +
                        "); " + where + " once there is space");
  }
  throw HubFetchError(Prefix() + meta.name + ": cannot write to the cache " + o_.cache_dir + " (" +
                      std::strerror(error) + "); " + where);
}

http::http_response Fetch::Get(const FileMeta& meta, int64_t from) {
  std::string url = meta.download_url;
  for (int hop = 0;; ++hop) {
    http::http_response r = Send(http::methods::GET, url, meta.name, from);
    const std::string location = HeaderValue(r, "Location");
    if (r.status_code() < 300 || r.status_code() >= 400 || location.empty()) {
      CheckStatus(r, meta.name);
      return r;
    }
    if (hop == o_.max_redirects) RedirectLoop(meta.name, url, location);
    url = HubHttp::Absolute(url, location);
  }
}

void Fetch::AppendBody(http::http_response& r, const FileMeta& meta, const fs::path& incomplete, bool restart) {
  std::ofstream out(incomplete, std::ios::binary | (restart ? std::ios::trunc : std::ios::app));
  if (!out) throw HubFetchError(Prefix() + "cannot write " + incomplete.string() + ": " + std::strerror(errno));
  std::vector<char> chunk(1 << 20);
  auto body = r.body().streambuf();
  while (true) {
    const size_t n = body.getn(reinterpret_cast<uint8_t*>(chunk.data()), chunk.size()).get();
    if (n == 0) break;
    if (!out.write(chunk.data(), static_cast<std::streamsize>(n)).flush()) WriteFailed(errno, meta, incomplete);
    done_ += static_cast<int64_t>(n);
    Report(meta.name);
  }
}

// Downloads into `incomplete`, resuming from what it holds; an interrupted transfer is
// retried from where it stopped, up to o_.attempts times.
void Fetch::Download(const FileMeta& meta, const fs::path& incomplete) {
  const int64_t done_before = done_;
  for (int attempt = 1;; ++attempt) {
    std::error_code ec;
    int64_t have = fs::exists(incomplete, ec) ? static_cast<int64_t>(fs::file_size(incomplete, ec)) : 0;
    if (have > meta.size) have = 0;
    done_ = done_before + have;
    if (have == meta.size && meta.size > 0) return;
    try {
      http::http_response r = Get(meta, have);
      AppendBody(r, meta, incomplete, /*restart=*/have == 0 || r.status_code() != http::status_codes::PartialContent);
    } catch (const HubFetchError&) {
      throw;
    } catch (const std::exception& e) {
      if (attempt >= o_.attempts) {
        const std::string host = web::uri(meta.download_url).host();
        throw HubUnavailableError(Prefix() + meta.name + ": download interrupted: " +
                                  (HubHttp::TimedOut(e)
                                       ? "no data from " + host + " for " + std::to_string(o_.timeout.count()) + " s"
                                       : std::string(e.what())));
      }
      continue;
    }
    const int64_t now = fs::exists(incomplete, ec) ? static_cast<int64_t>(fs::file_size(incomplete, ec)) : 0;
    if (now == meta.size) return;
    if (attempt >= o_.attempts) {
      throw HubUnavailableError(Prefix() + meta.name + ": download interrupted at " + std::to_string(now) + " of " +
                                std::to_string(meta.size) + " bytes (kept in " + incomplete.string() + " to resume)");
    }
  }
}

void Fetch::Verify(const FileMeta& meta, const fs::path& incomplete) const {
  std::string got;
  std::string kind;
  if (meta.lfs) {
    got = FileSha256(incomplete.string());
    kind = "sha256";
  } else if (IsHubCommitId(meta.etag)) {  // a git blob id has a commit id's form
    got = FileGitBlobSha1(incomplete.string());
    kind = "git blob sha1";
  } else {
    return;  // an ETag that is neither: the size check is all the hub lets us do
  }
  if (got == meta.etag) return;
  std::error_code ec;
  fs::remove(incomplete, ec);
  throw HubFetchError(Prefix() + meta.name + ": checksum mismatch: " + kind + " " + got + ", the hub says " +
                      meta.etag);
}

// blobs/<etag> (downloaded and checked unless already there), then the snapshot's link.
void Fetch::Place(const FileMeta& meta) {
  const fs::path blob = Below("blobs/" + meta.etag, meta.name);
  std::error_code ec;
  fs::create_directories(blob.parent_path(), ec);
  if (fs::exists(blob, ec)) {
    done_ += meta.size;
    Report(meta.name);
  } else {
    CacheLock lock(fs::path(o_.cache_dir) / ".locks" / HubRepoFolderName(o_.repo) / (meta.etag + ".lock"));
    const fs::path incomplete = blob.string() + ".incomplete";
    Download(meta, incomplete);
    Verify(meta, incomplete);
    fs::rename(incomplete, blob, ec);
    if (ec) throw HubFetchError(Prefix() + "cannot rename " + incomplete.string() + ": " + ec.message());
  }
  const fs::path link = Below("snapshots/" + commit_ + "/" + meta.name, meta.name);
  fs::create_directories(link.parent_path(), ec);
  fs::remove(link, ec);
  fs::create_symlink(fs::relative(blob, link.parent_path()), link, ec);
  if (ec) throw HubFetchError(Prefix() + "cannot link " + link.string() + ": " + ec.message());
}

std::vector<std::string> Fetch::Shards() {
  const fs::path index = repo_dir_ / "snapshots" / commit_ / kWeightsIndex;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(files::ReadWholeFile(index.string(), files::kMaxJsonFileBytes, "a JSON file"));
  } catch (const std::exception& e) {
    throw HubFetchError(Prefix() + kWeightsIndex + ": " + e.what());
  }
  try {
    return WeightMapShards(j);  // every name checked before it becomes a path
  } catch (const WeightIndexError& e) {
    throw HubFetchError(Prefix() + kWeightsIndex + ": " + e.what());
  }
}

std::string Fetch::Run() {
  const std::set<std::string> listed = ListRevision();
  if (!listed.count("config.json")) throw HubFetchError(Prefix() + "the repository has no config.json");
  std::vector<std::string> names = {"config.json"};
  for (const char* name : kOptionalFiles) {
    if (listed.count(name)) names.push_back(name);
  }
  if (listed.count(kSingleWeights)) {
    names.push_back(kSingleWeights);
  } else if (listed.count(kWeightsIndex)) {
    Place(Head(kWeightsIndex));
    for (const std::string& shard : Shards()) names.push_back(shard);
  } else {
    throw HubFetchError(Prefix() + "the repository has neither " + kSingleWeights + " nor " + kWeightsIndex);
  }
  std::vector<FileMeta> metas;
  for (const std::string& name : names) metas.push_back(Head(name));
  for (const FileMeta& m : metas) total_ += m.size;
  total_ += done_;
  for (const FileMeta& m : metas) Place(m);
  if (o_.revision != commit_) WriteRef();
  return (repo_dir_ / "snapshots" / commit_).string();
}

// refs/<revision> = the commit, no newline (as huggingface_hub writes it), whole or not at
// all: written beside and renamed over, so a full disk never leaves a truncated ref.
void Fetch::WriteRef() const {
  const fs::path ref = repo_dir_ / "refs" / o_.revision;
  const fs::path partial = ref.string() + ".incomplete";
  std::error_code ec;
  fs::create_directories(ref.parent_path(), ec);
  bool written = false;
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    written = out && (out << commit_).flush();
  }
  if (!written) {
    const int error = errno;
    fs::remove(partial, ec);
    throw HubFetchError(Prefix() + "cannot write " + ref.string() + " in the cache " + o_.cache_dir + ": " +
                        std::strerror(error));
  }
  fs::rename(partial, ref, ec);
  if (ec) throw HubFetchError(Prefix() + "cannot rename " + partial.string() + ": " + ec.message());
}

}  // namespace

std::string FetchHubSnapshot(const HubFetchOptions& options) {
  // refs/<revision> is written below the repository's folder: the name is checked first.
  if (std::string why = files::WhyNotRelativeBelow(options.revision); !why.empty()) {
    throw HubFetchError(options.repo + "@" + options.revision + ": the revision " + files::Quoted(options.revision) +
                        " " + why + " (it names a file under the cache's refs/)");
  }
  CachedSnapshot cached = FindCachedHubSnapshot(options.cache_dir, options.repo, options.revision);
  if (!cached.dir.empty()) return cached.dir;
  // One fetch per repository and cache; whoever waited finds the snapshot complete.
  CacheLock lock(fs::path(options.cache_dir) / ".locks" / HubRepoFolderName(options.repo) / "snapshot.lock");
  cached = FindCachedHubSnapshot(options.cache_dir, options.repo, options.revision);
  if (!cached.dir.empty()) return cached.dir;
  Fetch fetch(options);
  const std::string dir = fetch.Run();
  cached = FindCachedHubSnapshot(options.cache_dir, options.repo, options.revision);
  if (cached.dir.empty())
    throw HubFetchError(options.repo + "@" + options.revision + ": fetched, yet no " + cached.missing);
  return dir;
}

std::string ResolveHubModel(const std::string& repo, const std::string& revision, const std::string& spec_endpoint,
                            const std::function<void(const HubFetchProgress&)>& progress) {
  HubFetchOptions options;
  options.endpoint = ResolveHubEndpoint(spec_endpoint);
  options.repo = repo;
  options.revision = revision;
  options.cache_dir = HubCacheDir();
  const char* token = std::getenv(kHubTokenEnv);
  options.token = token != nullptr ? token : "";
  options.progress = progress;
  return FetchHubSnapshot(options);
}

}  // namespace headroom::hf
