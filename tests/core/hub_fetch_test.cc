// The Hub client against a local hub that speaks the Hub's HTTP API (tests/helpers/
// hub_test_server.h): the standard cache layout huggingface_hub reads, no network for a
// complete snapshot, resumption with Range after a cut, the token only on the endpoint's
// origin and never on disk, a connection dropped mid-file resumed with a Range, and one
// clear line for 401, 404, a checksum mismatch and a full disk.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/hf/hub_fetch.h"
#include "tests/helpers/dropping_http_host.h"
#include "tests/helpers/hub_test_server.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::hf {
namespace {
namespace fs = std::filesystem;
using headroom::testing::HubTestServer;

const std::string kCommit = "1111111111222222222233333333334444444444";
const std::string kRepo = "org/qwen2-fixture";
const std::string kToken = "hf_TestTokenThatMustNotLeak42";

std::string Fixture() { return (fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf/qwen2").string(); }

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class HubFetchTest : public ::testing::Test {
 protected:
  HubFetchTest() : server_(kRepo, kCommit, HubTestServer::FilesFrom(Fixture())) {}
  HubFetchOptions Options() const {
    HubFetchOptions o;
    o.endpoint = server_.endpoint();
    o.repo = kRepo;
    o.cache_dir = cache_.path();
    return o;
  }
  std::string FetchError(const HubFetchOptions& o) {
    try {
      FetchHubSnapshot(o);
    } catch (const HubFetchError& e) {
      return e.what();
    }
    return "<no error>";
  }
  fs::path RepoDir() const { return fs::path(cache_.path()) / "models--org--qwen2-fixture"; }
  size_t ContentRequests() const {
    size_t n = 0;
    for (const auto& r : server_.requests()) n += r.listener == "content";
    return n;
  }

  HubTestServer server_;
  headroom::testing::TempDir cache_{"hub-fetch-test"};
};

TEST_F(HubFetchTest, FillsTheStandardCacheLayout) {
  const std::string dir = FetchHubSnapshot(Options());
  EXPECT_EQ(dir, (RepoDir() / "snapshots" / kCommit).string());
  EXPECT_EQ(Slurp(RepoDir() / "refs" / "main"), kCommit);
  const std::string config = Slurp(fs::path(Fixture()) / "config.json");
  const std::string weights = Slurp(fs::path(Fixture()) / "model.safetensors");
  EXPECT_EQ(fs::read_symlink(fs::path(dir) / "config.json"),
            fs::path("../../blobs") / HubTestServer::GitBlobSha1(config));
  EXPECT_EQ(fs::read_symlink(fs::path(dir) / "model.safetensors"),
            fs::path("../../blobs") / HubTestServer::Sha256(weights));
  EXPECT_EQ(Slurp(fs::path(dir) / "model.safetensors"), weights);
  EXPECT_FALSE(fs::exists(fs::path(dir) / "expected.json")) << "fetched a file the worker does not load";
  for (const auto& entry : fs::recursive_directory_iterator(cache_.path())) {
    EXPECT_NE(entry.path().extension(), ".incomplete") << entry.path();
  }
  // Complete: the second fetch asks the hub nothing.
  const size_t before = server_.requests().size();
  EXPECT_EQ(FetchHubSnapshot(Options()), dir);
  EXPECT_EQ(server_.requests().size(), before);
}

TEST_F(HubFetchTest, ResumesACutDownloadWithARange) {
  server_.CutNextDownloadAfter(100);
  std::vector<int64_t> seen;
  HubFetchOptions o = Options();
  o.progress = [&](const HubFetchProgress& p) { seen.push_back(p.done_bytes); };
  const std::string dir = FetchHubSnapshot(o);
  EXPECT_EQ(Slurp(fs::path(dir) / "model.safetensors"), Slurp(fs::path(Fixture()) / "model.safetensors"));
  bool resumed = false;
  for (const auto& r : server_.requests()) resumed |= r.listener == "content" && r.range == "bytes=100-";
  EXPECT_TRUE(resumed) << "no Range request after the cut";
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), static_cast<int64_t>(fs::file_size(fs::path(Fixture()) / "model.safetensors") +
                                              fs::file_size(fs::path(Fixture()) / "config.json")));
}

// Unlike CutNextDownloadAfter (a short but complete response), the host announces the
// whole file and the connection ends partway through its body. The HTTP client hands the
// body over a read at a time (cpprest: 64 KiB), so the drop comes after the first read
// and what that read brought is kept.
TEST_F(HubFetchTest, ADroppedConnectionResumesWithARangeAndVerifies) {
  const std::string weights = Slurp(fs::path(Fixture()) / "model.safetensors");
  ASSERT_GT(weights.size(), (64u << 10) + 4096) << "the fixture must outlast one read";
  const auto drop_at = static_cast<int64_t>(weights.size() - 4096);
  headroom::testing::DroppingHttpHost content(server_.LfsContent());
  server_.RedirectLfsTo(content.url());
  content.DropNextBodyAfter(drop_at);
  const std::string dir = FetchHubSnapshot(Options());
  EXPECT_EQ(content.drops(), 1);
  const std::vector<std::string> ranges = content.ranges();
  ASSERT_EQ(ranges.size(), 2u) << "one cut GET, one resumed GET";
  EXPECT_EQ(ranges[0], "");
  ASSERT_EQ(ranges[1].rfind("bytes=", 0), 0u) << ranges[1];
  const int64_t resumed_from = std::stoll(ranges[1].substr(6));
  EXPECT_GT(resumed_from, 0) << "the bytes before the drop were kept";
  EXPECT_LE(resumed_from, drop_at);
  EXPECT_EQ(fs::read_symlink(fs::path(dir) / "model.safetensors"),
            fs::path("../../blobs") / HubTestServer::Sha256(weights));
  EXPECT_EQ(Slurp(fs::path(dir) / "model.safetensors"), weights);
  for (const auto& entry : fs::recursive_directory_iterator(cache_.path())) {
    EXPECT_NE(entry.path().extension(), ".incomplete") << entry.path();
  }
}

// A connection that drops on every attempt gives up with one line and keeps the partial
// blob to resume from, with nothing in the snapshot.
TEST_F(HubFetchTest, AConnectionThatKeepsDroppingKeepsThePartialBlobOnly) {
  const std::string weights = Slurp(fs::path(Fixture()) / "model.safetensors");
  headroom::testing::DroppingHttpHost content(server_.LfsContent());
  server_.RedirectLfsTo(content.url());
  HubFetchOptions o = Options();
  o.attempts = 1;
  content.DropNextBodyAfter(1000);
  const std::string error = FetchError(o);
  EXPECT_NE(error.find("model.safetensors: download interrupted"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(RepoDir() / "snapshots" / kCommit / "model.safetensors"));
  const fs::path partial = RepoDir() / "blobs" / (HubTestServer::Sha256(weights) + ".incomplete");
  ASSERT_TRUE(fs::exists(partial));
  EXPECT_LE(fs::file_size(partial), 1000u);
  EXPECT_EQ(FetchHubSnapshot(Options()), (RepoDir() / "snapshots" / kCommit).string());
  EXPECT_EQ(Slurp(RepoDir() / "snapshots" / kCommit / "model.safetensors"), weights);
}

TEST_F(HubFetchTest, ResumesWhatAnEarlierProcessLeftIncomplete) {
  const std::string weights = Slurp(fs::path(Fixture()) / "model.safetensors");
  fs::create_directories(RepoDir() / "blobs");
  std::ofstream(RepoDir() / "blobs" / (HubTestServer::Sha256(weights) + ".incomplete"), std::ios::binary)
      << weights.substr(0, 64);
  const std::string dir = FetchHubSnapshot(Options());
  EXPECT_EQ(Slurp(fs::path(dir) / "model.safetensors"), weights);
  std::vector<std::string> ranges;
  for (const auto& r : server_.requests()) {
    if (r.listener == "content") ranges.push_back(r.range);
  }
  EXPECT_EQ(ranges, std::vector<std::string>{"bytes=64-"});
}

TEST_F(HubFetchTest, TheTokenGoesOnlyToTheEndpointAndNeverToDisk) {
  server_.RequireToken(kToken);
  HubFetchOptions o = Options();
  o.token = kToken;
  FetchHubSnapshot(o);
  ASSERT_GT(ContentRequests(), 0u);
  for (const auto& r : server_.requests()) {
    EXPECT_EQ(r.authorization, r.listener == "hub" ? "Bearer " + kToken : "") << r.listener << " " << r.path;
  }
  for (const auto& entry : fs::recursive_directory_iterator(cache_.path())) {
    if (entry.is_regular_file()) EXPECT_EQ(Slurp(entry.path()).find(kToken), std::string::npos) << entry.path();
  }
}

TEST_F(HubFetchTest, UnauthorizedSaysWhetherATokenWasSent) {
  server_.RequireToken(kToken);
  const std::string without = FetchError(Options());
  EXPECT_NE(without.find("401"), std::string::npos) << without;
  EXPECT_NE(without.find("HF_TOKEN is not set"), std::string::npos) << without;
  HubFetchOptions wrong = Options();
  wrong.token = "hf_wrong_" + kToken;
  const std::string refused = FetchError(wrong);
  EXPECT_NE(refused.find("401"), std::string::npos) << refused;
  EXPECT_NE(refused.find("refused"), std::string::npos) << refused;
  EXPECT_EQ(refused.find(kToken), std::string::npos) << refused;
  EXPECT_EQ(refused.find('\n'), std::string::npos) << refused;
}

TEST_F(HubFetchTest, NotFoundNamesTheRepositoryOrTheRevision) {
  HubFetchOptions repo = Options();
  repo.repo = "org/missing";
  const std::string no_repo = FetchError(repo);
  EXPECT_NE(no_repo.find("404"), std::string::npos) << no_repo;
  EXPECT_NE(no_repo.find("no repository org/missing"), std::string::npos) << no_repo;
  HubFetchOptions revision = Options();
  revision.revision = "v9";
  const std::string no_revision = FetchError(revision);
  EXPECT_NE(no_revision.find("no revision \"v9\""), std::string::npos) << no_revision;
  EXPECT_FALSE(fs::exists(RepoDir() / "snapshots"));
}

TEST_F(HubFetchTest, AChecksumMismatchLeavesNoFileBehind) {
  server_.CorruptContent(true);
  const std::string error = FetchError(Options());
  EXPECT_NE(error.find("model.safetensors: checksum mismatch: sha256 "), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(RepoDir() / "snapshots" / kCommit / "model.safetensors"));
  EXPECT_FALSE(fs::exists(RepoDir() / "refs" / "main"));
  for (const auto& entry : fs::directory_iterator(RepoDir() / "blobs")) {
    EXPECT_NE(entry.path().filename().string(),
              HubTestServer::Sha256(Slurp(fs::path(Fixture()) / "model.safetensors")));
    EXPECT_NE(entry.path().extension(), ".incomplete") << entry.path();
  }
}

// What a hostile repository can put in the names it hands out: a weight map naming files
// outside the snapshot, an ETag of "..". The fetch refuses with one line naming the
// repository, the file and the bad name (bad input: the worker exits 2), and nothing
// outside the repository's cache folder is touched.
class HostileHubTest : public ::testing::Test {
 protected:
  HostileHubTest() {
    std::ofstream(victim_) << "victim\n";
    std::ofstream(absolute_victim_) << "absolute victim\n";
  }
  std::string FetchError(HubTestServer& server) {
    HubFetchOptions o;
    o.endpoint = server.endpoint();
    o.repo = kRepo;
    o.cache_dir = cache_;
    try {
      FetchHubSnapshot(o);
    } catch (const HubUnavailableError& e) {
      return std::string("<unavailable, not bad input> ") + e.what();
    } catch (const HubFetchError& e) {
      return e.what();
    }
    return "<no error>";
  }
  void ExpectVictimsUntouched() {
    for (const auto& [path, text] : {std::pair{victim_, "victim\n"}, {absolute_victim_, "absolute victim\n"}}) {
      EXPECT_FALSE(fs::is_symlink(path)) << path;
      EXPECT_EQ(Slurp(path), text) << path;
    }
  }
  static std::map<std::string, headroom::testing::HubTestFile> IndexNaming(const std::string& shard) {
    std::map<std::string, headroom::testing::HubTestFile> files;
    files["config.json"] = {Slurp(fs::path(Fixture()) / "config.json")};
    files["model.safetensors.index.json"] = {
        nlohmann::json{{"metadata", nlohmann::json::object()}, {"weight_map", {{"lm_head.weight", shard}}}}.dump()};
    files["model-00001-of-00001.safetensors"] = {Slurp(fs::path(Fixture()) / "model.safetensors"), true};
    return files;
  }

  headroom::testing::TempDir dir_{"hub-hostile-test"};
  std::string cache_ = dir_.path() + "/cache";
  std::string victim_ = dir_.path() + "/victim.txt";
  std::string absolute_victim_ = dir_.path() + "/absolute-victim.txt";
};

TEST_F(HostileHubTest, AWeightMapNamingAFileOutsideTheSnapshotIsRefusedNamingIt) {
  // cache/models--org--qwen2-fixture/snapshots/<commit>/../../../../victim.txt is victim_.
  for (const std::string& shard : {std::string("../../../../victim.txt"), absolute_victim_}) {
    HubTestServer server(kRepo, kCommit, IndexNaming(shard));
    const std::string error = FetchError(server);
    EXPECT_EQ(error.rfind(kRepo + "@main: model.safetensors.index.json: weight_map names \"" + shard + "\"", 0), 0u)
        << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    ExpectVictimsUntouched();
  }
}

TEST_F(HostileHubTest, AnEtagOfDotDotIsRefusedAndLeavesNoLinkToTheRepository) {
  HubTestServer server(kRepo, kCommit, HubTestServer::FilesFrom(Fixture()));
  server.OverrideEtag("config.json", "..");
  const std::string error = FetchError(server);
  EXPECT_EQ(error.rfind(kRepo + "@main: config.json: the hub's ETag \"..\" has a '..' component", 0), 0u) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  const fs::path snapshots = fs::path(cache_) / "models--org--qwen2-fixture" / "snapshots";
  if (fs::exists(snapshots)) {
    for (const auto& entry : fs::recursive_directory_iterator(snapshots)) {
      EXPECT_FALSE(entry.is_symlink() && fs::is_directory(entry.path())) << entry.path() << " links to a directory";
    }
  }
  ExpectVictimsUntouched();
}

// 5xx answers are the hub's trouble: asked again with a growing wait, and a success after
// them is a success. A 4xx is the request's (the user's) and is not asked again.
TEST_F(HubFetchTest, AServerErrorIsRetriedAndThenSucceeds) {
  server_.FailNextHubRequests(2, 500);
  HubFetchOptions o = Options();
  o.retry_delay = std::chrono::milliseconds(1);
  const std::string dir = FetchHubSnapshot(o);
  EXPECT_EQ(Slurp(fs::path(dir) / "model.safetensors"), Slurp(fs::path(Fixture()) / "model.safetensors"));
  size_t listings = 0;
  for (const auto& r : server_.requests()) listings += r.path.find("/revision/") != std::string::npos;
  EXPECT_EQ(listings, 3u) << "two 500s, then the listing";
}

TEST_F(HubFetchTest, AServerErrorThatPersistsIsUnavailableNotBadInput) {
  server_.FailNextHubRequests(100, 503);
  HubFetchOptions o = Options();
  o.retry_delay = std::chrono::milliseconds(1);
  o.request_attempts = 3;
  try {
    FetchHubSnapshot(o);
    ADD_FAILURE() << "no error";
  } catch (const HubUnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find("503"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3 tries"), std::string::npos) << e.what();
  }
  EXPECT_EQ(server_.requests().size(), 3u);
}

TEST_F(HubFetchTest, AClientErrorIsNotRetried) {
  server_.FailNextHubRequests(1, 400);
  HubFetchOptions o = Options();
  o.retry_delay = std::chrono::milliseconds(1);
  try {
    FetchHubSnapshot(o);
    ADD_FAILURE() << "no error";
  } catch (const HubUnavailableError& e) {
    ADD_FAILURE() << "a 400 is the request's error: " << e.what();
  } catch (const HubFetchError& e) {
    EXPECT_NE(std::string(e.what()).find("400"), std::string::npos) << e.what();
  }
  EXPECT_EQ(server_.requests().size(), 1u);
}

TEST_F(HubFetchTest, ARedirectLoopIsNamedAsOne) {
  server_.RedirectContentToItself(true);
  HubFetchOptions o = Options();
  o.attempts = 1;
  try {
    FetchHubSnapshot(o);
    ADD_FAILURE() << "no error";
  } catch (const HubFetchError& e) {
    const std::string error = e.what();
    EXPECT_NE(error.find("model.safetensors: redirect loop: more than 5 redirects"), std::string::npos) << error;
    EXPECT_EQ(error.find("interrupted"), std::string::npos) << error;
  }
  EXPECT_FALSE(fs::exists(RepoDir() / "snapshots" / kCommit / "model.safetensors"));
}

// A host that takes the connection and never answers (its listen backlog accepts it).
class SilentHost {
 public:
  SilentHost() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("silent host: cannot listen");
    }
    url_ = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  }
  ~SilentHost() { ::close(fd_); }
  const std::string& url() const { return url_; }

 private:
  int fd_ = -1;
  std::string url_;
};

TEST_F(HubFetchTest, AStallNamesTheTimeoutItWaited) {
  SilentHost silent;
  HubFetchOptions o = Options();
  o.endpoint = silent.url();
  o.timeout = std::chrono::seconds(1);
  o.request_attempts = 2;
  o.retry_delay = std::chrono::milliseconds(1);
  try {
    FetchHubSnapshot(o);
    ADD_FAILURE() << "no error";
  } catch (const HubUnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find("no answer from 127.0.0.1 within 1 s (2 tries)"), std::string::npos)
        << e.what();
  }
}

// A tmpfs of a given size mounted on `dir` for the test's lifetime (needs CAP_SYS_ADMIN).
class SmallTmpfs {
 public:
  SmallTmpfs(const std::string& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) != 0) error_ = std::strerror(errno);
  }
  ~SmallTmpfs() {
    if (error_.empty()) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }  // "" = mounted
  bool Resize(const std::string& size) {
    return ::mount("tmpfs", dir_.c_str(), "tmpfs", MS_REMOUNT, ("size=" + size).c_str()) == 0;
  }

 private:
  std::string dir_;
  std::string error_;
};

TEST_F(HubFetchTest, AFullDiskIsOneLineNamingTheCacheAndTheNextFetchResumes) {
  const std::string cache = (fs::path(cache_.path()) / "small").string();
  SmallTmpfs tmpfs(cache, "48k");  // config.json fits, half of model.safetensors (88 KiB) does not
  if (!tmpfs.error().empty())
    GTEST_SKIP() << "cannot mount a small tmpfs for the cache (needs root): " << tmpfs.error();
  HubFetchOptions o = Options();
  o.cache_dir = cache;
  const std::string error = FetchError(o);
  EXPECT_NE(error.find("model.safetensors"), std::string::npos) << error;
  EXPECT_NE(error.find("the cache " + cache + " is full"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  const std::string weights = Slurp(fs::path(Fixture()) / "model.safetensors");
  const fs::path repo = fs::path(cache) / "models--org--qwen2-fixture";
  EXPECT_FALSE(fs::exists(repo / "snapshots" / kCommit / "model.safetensors")) << "no half file in the snapshot";
  EXPECT_FALSE(fs::exists(repo / "blobs" / HubTestServer::Sha256(weights)));
  EXPECT_FALSE(fs::exists(repo / "refs" / "main"));
  // As huggingface_hub does: the partial download stays as blobs/<etag>.incomplete to resume.
  const fs::path partial = repo / "blobs" / (HubTestServer::Sha256(weights) + ".incomplete");
  ASSERT_TRUE(fs::exists(partial));
  const auto kept = static_cast<int64_t>(fs::file_size(partial));
  EXPECT_GT(kept, 0);

  ASSERT_TRUE(tmpfs.Resize("1m")) << std::strerror(errno);
  const size_t before = server_.requests().size();
  const std::string dir = FetchHubSnapshot(o);
  EXPECT_EQ(Slurp(fs::path(dir) / "model.safetensors"), weights);
  EXPECT_FALSE(fs::exists(partial));
  bool resumed = false;
  const std::vector<headroom::testing::HubRequestSeen> seen = server_.requests();
  for (size_t i = before; i < seen.size(); ++i) {
    resumed |= seen[i].listener == "content" && seen[i].range == "bytes=" + std::to_string(kept) + "-";
  }
  EXPECT_TRUE(resumed) << "the next fetch resumes from the kept bytes";
}

}  // namespace
}  // namespace headroom::hf
