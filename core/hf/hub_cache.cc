#include "core/hf/hub_cache.h"

#include "core/files/untrusted_path.h"
#include "core/hf/hf_config.h"
#include "core/hf/weight_index.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

namespace headroom::hf {
namespace fs = std::filesystem;
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

bool IsFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);  // follows the snapshot's symlink into blobs/
}

// "" when snapshot/name stays inside the repository's folder (snapshots/ links lead into
// blobs/, never out), else what is wrong, as a "missing" phrase.
std::string LeadsOut(const fs::path& snapshot, const std::string& name) {
  try {
    files::PathBelow(snapshot.parent_path().parent_path(),
                     (fs::path("snapshots") / snapshot.filename() / name).string());
  } catch (const files::UntrustedPathError& e) {
    return (snapshot / name).string() + " inside the cache (" + e.what() + ")";
  }
  return "";
}

// What the weights need that the snapshot lacks; "" when complete.
std::string MissingWeights(const fs::path& snapshot) {
  if (IsFile(snapshot / "model.safetensors")) return LeadsOut(snapshot, "model.safetensors");
  const fs::path index = snapshot / "model.safetensors.index.json";
  if (!IsFile(index)) return (snapshot / "model.safetensors").string() + " (or its .index.json)";
  if (std::string out = LeadsOut(snapshot, kWeightsIndexFileName); !out.empty()) return out;
  std::ifstream in(index, std::ios::binary);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> shards;
  try {
    shards = WeightMapShards(j);
  } catch (const WeightIndexError& e) {
    // Never joined to the snapshot: a name from outside is checked first.
    return index.string() + " as a valid index (" + e.what() + ")";
  }
  for (const std::string& shard : shards) {
    if (std::string out = LeadsOut(snapshot, shard); !out.empty()) return out;
    if (!IsFile(snapshot / shard)) return (snapshot / shard).string();
  }
  return "";
}

}  // namespace

std::string HubCacheDir() {
  if (std::string dir = Env("HF_HUB_CACHE"); !dir.empty()) return dir;
  if (std::string home = Env("HF_HOME"); !home.empty()) return (fs::path(home) / "hub").string();
  if (std::string xdg = Env("XDG_CACHE_HOME"); !xdg.empty()) return (fs::path(xdg) / "huggingface" / "hub").string();
  return (fs::path(Env("HOME")) / ".cache" / "huggingface" / "hub").string();
}

std::string HubRepoFolderName(const std::string& repo) {
  std::string folder = "models--";
  for (char ch : repo) {
    if (ch == '/') {
      folder += "--";
    } else {
      folder += ch;
    }
  }
  return folder;
}

bool IsHubCommitId(const std::string& revision) {
  if (revision.size() != 40) return false;
  for (char ch : revision) {
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
  }
  return true;
}

CachedSnapshot FindCachedHubSnapshot(const std::string& cache_dir, const std::string& repo,
                                     const std::string& revision) {
  const fs::path repo_dir = fs::absolute(fs::path(cache_dir) / HubRepoFolderName(repo));
  std::string commit = revision;
  if (!IsHubCommitId(revision)) {
    if (std::string why = files::WhyNotRelativeBelow(revision); !why.empty()) {
      return {"",
              (repo_dir / "refs").string() + " entry for the revision " + files::Quoted(revision) + ", which " + why};
    }
    const fs::path ref = repo_dir / "refs" / revision;
    std::ifstream in(ref, std::ios::binary);
    if (!in || !std::getline(in, commit) || !IsHubCommitId(commit)) {
      return {"", ref.string() + " (the commit revision \"" + revision + "\" names)"};
    }
  }
  const fs::path snapshot = repo_dir / "snapshots" / commit;
  if (!IsFile(snapshot / "config.json")) return {"", (snapshot / "config.json").string()};
  if (std::string out = LeadsOut(snapshot, "config.json"); !out.empty()) return {"", out};
  if (std::string missing = MissingWeights(snapshot); !missing.empty()) return {"", missing};
  return {snapshot.string(), ""};
}

std::string RequireCachedHubSnapshot(const std::string& repo, const std::string& revision) {
  const std::string cache = HubCacheDir();
  CachedSnapshot found = FindCachedHubSnapshot(cache, repo, revision);
  if (found.dir.empty()) {
    throw HfConfigError(repo + "@" + revision + " is not in the Hugging Face cache " + cache + ": no " + found.missing);
  }
  return found.dir;
}

}  // namespace headroom::hf
