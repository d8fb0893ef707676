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

struct HubFetchProgress {
  std::string file;          // the file being downloaded
  int64_t done_bytes = 0;    // of every file this fetch downloads, cached ones included
  int64_t total_bytes = 0;
};

struct HubFetchOptions {
  std::string endpoint;      // as ResolveHubEndpoint returns it
  std::string repo;
  std::string revision = "main";
  std::string cache_dir;     // HubCacheDir() unless a test names one
  std::string token;         // "" = anonymous; sent only to the endpoint's origin
  int attempts = 3;          // per file: an interrupted download resumes this many times
  std::function<void(const HubFetchProgress&)> progress;  // after each chunk; may be empty
};

// The snapshot directory, complete and checked; throws HubFetchError.
std::string FetchHubSnapshot(const HubFetchOptions& options);

// The model directory for a spec's hub reference: HubCacheDir(), the spec's endpoint or
// HF_ENDPOINT, the token from HF_TOKEN. Progress goes to `progress` (may be empty).
std::string ResolveHubModel(const std::string& repo, const std::string& revision, const std::string& spec_endpoint,
                            const std::function<void(const HubFetchProgress&)>& progress);

}  // namespace headroom::hf
