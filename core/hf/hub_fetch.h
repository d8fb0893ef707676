// Fetches the files a worker loads from a Hugging Face Hub model into the standard cache
// (see hub_cache.h for the layout), the way huggingface_hub does: the revision API names
// the commit and the files, a HEAD on resolve/<commit>/<file> gives each file's ETag
// (X-Linked-Etag, the sha256, for LFS files), size (X-Linked-Size) and, for LFS files, a
// 302 to the content URL. Each file is downloaded into blobs/<etag>.incomplete (resumed
// with a Range request when one is there), checked, renamed to blobs/<etag>, and linked
// from snapshots/<commit>/; refs/<revision> is written last. A snapshot that is already
// complete is used without network. One process per cache downloads a repository at a
// time (flock on .locks/models--org--name/snapshot.lock); the others wait, then find it
// complete.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace headroom::hf {

// The token's environment variable, as huggingface_hub names it.
inline constexpr const char* kHubTokenEnv = "HF_TOKEN";

// One clear line: the repository, what failed and why. Never carries the token.
class HubFetchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The hub did not answer usefully although the request was right: 5xx or 429 answers,
// connections refused or reset, stalls past the timeout, after every retry. Not the
// user's error: a later attempt may succeed (the worker exits 1, and is restarted).
// Everything else (4xx, a bad name or checksum, a full cache) is a plain HubFetchError.
class HubUnavailableError : public HubFetchError {
 public:
  using HubFetchError::HubFetchError;
};

struct HubFetchProgress {
  std::string file;        // the file being downloaded
  int64_t done_bytes = 0;  // of every file this fetch downloads, cached ones included
  int64_t total_bytes = 0;
};

struct HubFetchOptions {
  std::string endpoint;  // as ResolveHubEndpoint returns it
  std::string repo;
  std::string revision = "main";
  std::string cache_dir;  // HubCacheDir() unless a test names one
  std::string token;      // "" = anonymous; sent only to the endpoint's origin
  int attempts = 3;       // per file: an interrupted download resumes this many times
  // Per request: a 5xx or 429 answer, or no connection, is tried this many times in all,
  // waiting retry_delay, then twice that, ... between tries.
  int request_attempts = 4;
  std::chrono::milliseconds retry_delay{1000};
  std::chrono::seconds timeout{60};                       // a request's wait for an answer, or for the next body bytes
  int max_redirects = 5;                                  // per request, before it is called a redirect loop
  std::function<void(const HubFetchProgress&)> progress;  // after each chunk; may be empty
};

// The snapshot directory, complete and checked; throws HubFetchError (HubUnavailableError
// when trying again later may help). Every name the hub gives that becomes a path (a
// shard in the weight index, an ETag) is checked first (core/files/untrusted_path.h): a
// bad one is one line naming the repository, the file and the name, and nothing outside
// the repository's cache folder is touched.
std::string FetchHubSnapshot(const HubFetchOptions& options);

// The model directory for a spec's hub reference: HubCacheDir(), the spec's endpoint or
// HF_ENDPOINT, the token from HF_TOKEN. Progress goes to `progress` (may be empty).
std::string ResolveHubModel(const std::string& repo, const std::string& revision, const std::string& spec_endpoint,
                            const std::function<void(const HubFetchProgress&)>& progress);

}  // namespace headroom::hf
