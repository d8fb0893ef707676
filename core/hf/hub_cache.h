// The standard Hugging Face cache layout, as huggingface_hub writes and reads it, so that
// a cache a user already has is reused and huggingface_hub can read what headroom puts
// there:
//   <cache>/models--<org>--<name>/blobs/<etag>                  file contents
//   <cache>/models--<org>--<name>/snapshots/<commit>/<file>     -> ../../blobs/<etag>
//   <cache>/models--<org>--<name>/refs/<revision>               the commit, no newline
// This file knows the layout and how to find a complete snapshot in it without network.
#pragma once

#include <string>

namespace headroom::hf {

// The cache directory: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else $HOME/.cache/huggingface/hub (huggingface_hub's order).
std::string HubCacheDir();

// "models--org--name" for "org/name" (every '/' becomes "--").
std::string HubRepoFolderName(const std::string& repo);

// True when `revision` is a full commit id (40 lowercase hexadecimal digits).
bool IsHubCommitId(const std::string& revision);

// The outcome of looking for a snapshot of repo@revision in a cache.
struct CachedSnapshot {
  std::string dir;      // snapshots/<commit>, absolute; "" when not usable
  std::string missing;  // when dir is "": what is missing, one phrase naming the path
};

// The snapshot that `revision` names (a commit itself, or refs/<revision>), when it holds
// every file a worker loads: config.json, and model.safetensors or
// model.safetensors.index.json with every shard its weight_map names. Reads only the disk.
CachedSnapshot FindCachedHubSnapshot(const std::string& cache_dir, const std::string& repo,
                                     const std::string& revision);

// FindCachedHubSnapshot in HubCacheDir(): the snapshot directory, or an HfConfigError
// "<repo>@<revision> is not in the Hugging Face cache <dir>: no <path>". The one place a
// hub reference becomes a model directory (the worker before loading, the planner).
std::string RequireCachedHubSnapshot(const std::string& repo, const std::string& revision);

}  // namespace headroom::hf
