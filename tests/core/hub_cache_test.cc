// The Hugging Face cache layout: a snapshot laid out as huggingface_hub lays it out
// (blobs/, snapshots/<commit>/ symlinks, refs/<revision>) is found without network; one
// that lacks a file the worker loads is refused naming that file.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "core/hf/hub_cache.h"
#include "core/hf/hub_reference.h"

namespace headroom::hf {
namespace {
namespace fs = std::filesystem;

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

class HubCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = fs::temp_directory_path() / ("hub_cache_test_" + std::to_string(::getpid()));
    fs::remove_all(cache_);
    repo_dir_ = cache_ / "models--org--tiny";
  }
  void TearDown() override { fs::remove_all(cache_); }

  // A file as huggingface_hub stores it: contents in blobs/<etag>, a relative symlink in the snapshot.
  void AddFile(const std::string& name, const std::string& etag, const std::string& contents) {
    fs::create_directories(repo_dir_ / "blobs");
    fs::create_directories(repo_dir_ / "snapshots" / kCommit);
    std::ofstream(repo_dir_ / "blobs" / etag) << contents;
    fs::create_symlink(fs::path("../../blobs") / etag, repo_dir_ / "snapshots" / kCommit / name);
  }
  void AddRef(const std::string& revision, const std::string& commit) {
    fs::create_directories((repo_dir_ / "refs" / revision).parent_path());
    std::ofstream(repo_dir_ / "refs" / revision) << commit;  // no newline, as huggingface_hub writes it
  }

  fs::path cache_, repo_dir_;
};

TEST(HubCacheNames, FolderAndCommitId) {
  EXPECT_EQ(HubRepoFolderName("Qwen/Qwen2.5-0.5B-Instruct"), "models--Qwen--Qwen2.5-0.5B-Instruct");
  EXPECT_EQ(HubRepoFolderName("gpt2"), "models--gpt2");
  EXPECT_TRUE(IsHubCommitId(kCommit));
  EXPECT_FALSE(IsHubCommitId("main"));
  EXPECT_FALSE(IsHubCommitId("0123456789ABCDEF0123456789abcdef01234567"));
}

TEST(HubCacheNames, CacheDirFollowsHuggingFaceHubsOrder) {
  ::setenv("HF_HUB_CACHE", "/a/hub", 1);
  ::setenv("HF_HOME", "/b", 1);
  EXPECT_EQ(HubCacheDir(), "/a/hub");
  ::unsetenv("HF_HUB_CACHE");
  EXPECT_EQ(HubCacheDir(), "/b/hub");
  ::unsetenv("HF_HOME");
  ::setenv("XDG_CACHE_HOME", "/c", 1);
  EXPECT_EQ(HubCacheDir(), "/c/huggingface/hub");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/d", 1);
  EXPECT_EQ(HubCacheDir(), "/d/.cache/huggingface/hub");
}

TEST(HubCacheNames, EndpointFromSpecThenEnvironment) {
  ::setenv(kHubEndpointEnv, "http://mirror.local:9000/", 1);
  EXPECT_EQ(ResolveHubEndpoint(""), "http://mirror.local:9000");
  EXPECT_EQ(ResolveHubEndpoint("https://other.example"), "https://other.example");
  ::unsetenv(kHubEndpointEnv);
  EXPECT_EQ(ResolveHubEndpoint(""), kDefaultHubEndpoint);
}

TEST_F(HubCacheTest, FindsASingleFileSnapshotThroughItsRef) {
  AddFile("config.json", "aaaa", "{}");
  AddFile("model.safetensors", "bbbb", "weights");
  AddRef("main", kCommit);
  CachedSnapshot found = FindCachedHubSnapshot(cache_.string(), "org/tiny", "main");
  EXPECT_EQ(found.missing, "");
  EXPECT_EQ(found.dir, (repo_dir_ / "snapshots" / kCommit).string());
  // A commit id needs no ref.
  EXPECT_EQ(FindCachedHubSnapshot(cache_.string(), "org/tiny", kCommit).dir, found.dir);
  // A revision the cache has no ref for is not guessed.
  CachedSnapshot other = FindCachedHubSnapshot(cache_.string(), "org/tiny", "v2");
  EXPECT_EQ(other.dir, "");
  EXPECT_NE(other.missing.find("refs/v2"), std::string::npos) << other.missing;
}

TEST_F(HubCacheTest, ShardedSnapshotNeedsEveryShard) {
  AddFile("config.json", "aaaa", "{}");
  AddFile(
      "model.safetensors.index.json", "cccc",
      R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
  AddFile("model-00001-of-00002.safetensors", "dddd", "one");
  AddRef("main", kCommit);
  CachedSnapshot partial = FindCachedHubSnapshot(cache_.string(), "org/tiny", "main");
  EXPECT_EQ(partial.dir, "");
  EXPECT_NE(partial.missing.find("model-00002-of-00002.safetensors"), std::string::npos) << partial.missing;
  AddFile("model-00002-of-00002.safetensors", "eeee", "two");
  EXPECT_NE(FindCachedHubSnapshot(cache_.string(), "org/tiny", "main").dir, "");
}

TEST_F(HubCacheTest, ASymlinkToAMissingBlobIsMissing) {
  AddFile("config.json", "aaaa", "{}");
  AddFile("model.safetensors", "bbbb", "weights");
  AddRef("main", kCommit);
  fs::remove(repo_dir_ / "blobs" / "bbbb");
  CachedSnapshot found = FindCachedHubSnapshot(cache_.string(), "org/tiny", "main");
  EXPECT_EQ(found.dir, "");
  EXPECT_NE(found.missing.find("model.safetensors"), std::string::npos) << found.missing;
}

}  // namespace
}  // namespace headroom::hf

namespace headroom::hf {
namespace {

// A cached index naming a file outside the snapshot (one that exists: the file check alone
// would call the snapshot complete), or a shard that links out of the repository's folder:
// never a usable snapshot, and the reason names the bad name.
TEST_F(HubCacheTest, AnIndexNamingAFileOutsideTheSnapshotIsNeverComplete) {
  const fs::path outside = cache_ / "outside.safetensors";
  AddFile("config.json", "aaaa", "{}");
  AddRef("main", kCommit);
  std::ofstream(outside) << "not the repository's";
  for (const std::string& shard : {outside.string(), std::string("../../../outside.safetensors")}) {
    fs::remove(repo_dir_ / "snapshots" / kCommit / "model.safetensors.index.json");
    fs::remove(repo_dir_ / "blobs" / "cccc");
    AddFile("model.safetensors.index.json", "cccc", R"({"weight_map": {"a": ")" + shard + R"("}})");
    const CachedSnapshot found = FindCachedHubSnapshot(cache_.string(), "org/tiny", "main");
    EXPECT_EQ(found.dir, "") << shard;
    EXPECT_NE(found.missing.find("weight_map names \"" + shard + "\""), std::string::npos) << found.missing;
  }
  fs::remove(repo_dir_ / "snapshots" / kCommit / "model.safetensors.index.json");
  fs::remove(repo_dir_ / "blobs" / "cccc");
  AddFile("model.safetensors.index.json", "cccc", R"({"weight_map": {"a": "model.safetensors"}})");
  fs::create_symlink(outside, repo_dir_ / "snapshots" / kCommit / "model.safetensors");
  const CachedSnapshot linked = FindCachedHubSnapshot(cache_.string(), "org/tiny", "main");
  EXPECT_EQ(linked.dir, "");
  EXPECT_NE(linked.missing.find("leads out of"), std::string::npos) << linked.missing;
}

}  // namespace
}  // namespace headroom::hf
