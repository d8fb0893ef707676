// The checkpoint format's integrity parts, without LibTorch: SHA-256 against the FIPS
// 180-4 examples, the checksum a DurableFile records equal to the file's as stored, a
// manifest that names a truncated or bit-flipped file, the atomic directory publish, and a
// damaged step set aside where neither resume nor pruning touches it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/checkpoint/checkpoint_layout.h"
#include "core/checkpoint/checkpoint_manifest.h"
#include "core/checkpoint/durable_file.h"
#include "core/checkpoint/sha256.h"

namespace headroom::checkpoint {
namespace {
namespace fs = std::filesystem;

class Scratch : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "headroom-ckpt-XXXXXX").string();
    root_ = mkdtemp(pattern.data());
  }
  void TearDown() override { fs::remove_all(root_); }

  // DIR/step-N with one rank file of `bytes` bytes and its manifest, as the writer leaves it.
  fs::path WriteStep(int64_t step, size_t bytes) {
    const fs::path dir = root_ / StepDirName(step);
    fs::create_directories(dir);
    std::string data(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i * 131 + step);
    DurableFile file(dir / RankFileName(0));
    file.Write(data.data(), data.size());
    file.Sync();
    file.Close();
    CheckpointManifest m;
    m.step = step;
    m.spec_hash = "h";
    m.rng_state = {"r"};
    m.file_bytes[RankFileName(0)] = bytes;
    m.file_sha256[RankFileName(0)] = file.sha256_hex();
    TensorEntry w;
    w.shape = {static_cast<int64_t>(bytes / 4)};
    w.shards = {{RankFileName(0), 0, static_cast<int64_t>(bytes / 4), 0}};
    m.tensors["model.w"] = w;
    ReplaceFileAtomically(dir / kManifestFileName, m.ToJson().dump(1));
    WriteLatest(root_, step);
    return dir;
  }

  fs::path root_;
};

std::string Hex(const std::string& text) {
  Sha256 h;
  h.Update(text.data(), text.size());
  return h.HexDigest();
}

TEST(Sha256Test, MatchesTheStandardsExamples) {
  EXPECT_EQ(Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 pieces;  // the same digest fed in pieces, and still running after a digest
  pieces.Update("a", 1);
  EXPECT_EQ(pieces.HexDigest(), Hex("a"));
  pieces.Update("bc", 2);
  EXPECT_EQ(pieces.HexDigest(), Hex("abc"));
}

TEST_F(Scratch, TheWrittenChecksumIsTheStoredFilesAndTheManifestKeepsIt) {
  const fs::path dir = WriteStep(3, 3 << 20);  // several read buffers' worth
  const CheckpointManifest m = CheckpointManifest::Read(dir);
  ASSERT_EQ(m.file_sha256.count(RankFileName(0)), 1u);
  EXPECT_EQ(m.file_sha256.at(RankFileName(0)), FileSha256(dir / RankFileName(0)));
  EXPECT_NO_THROW(m.VerifyFile(dir, RankFileName(0)));
}

TEST_F(Scratch, ABitFlipIsNamedWithTheFile) {
  const fs::path dir = WriteStep(3, 4096);
  {
    std::fstream f(dir / RankFileName(0), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(1234);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(1234);
    f.write(&c, 1);
  }
  const CheckpointManifest m = CheckpointManifest::Read(dir);  // the size is right
  try {
    m.VerifyFile(dir, RankFileName(0));
    FAIL() << "a flipped bit passed";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(RankFileName(0) + " is corrupt: its sha256 is"), std::string::npos)
        << e.what();
  }
}

TEST_F(Scratch, ATruncatedFileIsNamed) {
  const fs::path dir = WriteStep(3, 4096);
  fs::resize_file(dir / RankFileName(0), 4000);
  try {
    CheckpointManifest::Read(dir);
    FAIL() << "a truncated file passed";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(RankFileName(0) + " has 4000 bytes, the manifest recorded 4096 (truncated)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Scratch, AStepWithoutChecksumsStillReads) {
  const fs::path dir = WriteStep(3, 64);
  auto json = nlohmann::json::parse(ReadWholeFile(dir / kManifestFileName));
  json["files"][RankFileName(0)].erase("sha256");
  ReplaceFileAtomically(dir / kManifestFileName, json.dump());
  const CheckpointManifest m = CheckpointManifest::Read(dir);
  EXPECT_TRUE(m.file_sha256.empty());
  EXPECT_NO_THROW(m.VerifyFile(dir, RankFileName(0)));
}

TEST_F(Scratch, PublishPutsTheStagedDirectoryInPlaceAndReplacesAnOldOne) {
  const fs::path staged = root_ / "out.partial", target = root_ / "out";
  fs::create_directories(staged);
  std::ofstream(staged / "a") << "first";
  PublishDirectory(staged, target);
  EXPECT_FALSE(fs::exists(staged));
  EXPECT_EQ(ReadWholeFile(target / "a"), "first");
  fs::create_directories(staged);
  std::ofstream(staged / "b") << "second";
  PublishDirectory(staged, target);
  EXPECT_FALSE(fs::exists(staged));
  EXPECT_FALSE(fs::exists(target / "a"));
  EXPECT_EQ(ReadWholeFile(target / "b"), "second");
}

TEST_F(Scratch, ADamagedStepSetAsideIsNeitherCompleteNorPruned) {
  WriteStep(2, 64);
  WriteStep(3, 64);
  const fs::path aside = SetAsideCorruptStep(root_, 3);
  EXPECT_EQ(aside, root_ / "step-000003.corrupt");
  EXPECT_TRUE(fs::exists(aside / kManifestFileName));
  EXPECT_EQ(CompleteSteps(root_), std::vector<int64_t>({2}));
  WriteLatest(root_, 2);
  EXPECT_TRUE(PruneCheckpoints(root_, 1).empty());
  EXPECT_TRUE(fs::exists(aside));
  EXPECT_EQ(StepDirOf(root_), root_ / "step-000002");
}

// `latest` is one file: deleted by hand or lost with its directory entry, the intact
// steps are still there, and the reader takes the newest of them, saying why.
TEST_F(Scratch, AMissingLatestIsTheNewestCompleteStepNeverNoCheckpoint) {
  WriteStep(15, 64);
  WriteStep(18, 64);
  fs::remove(root_ / kLatestFileName);
  const std::optional<LatestStep> found = FindLatestStep(root_);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->step, 18);
  EXPECT_EQ(found->dir, root_ / "step-000018");
  EXPECT_EQ(found->fallback,
            (root_ / kLatestFileName).string() + " is missing; the newest complete step is step-000018");
  EXPECT_EQ(LatestCheckpoint(root_), root_ / "step-000018");
  EXPECT_EQ(LatestCheckpointStep(root_), 18);
  EXPECT_EQ(StepDirOf(root_), root_ / "step-000018");
  // `latest` naming a step is the step; an empty directory is no checkpoint.
  WriteLatest(root_, 15);
  EXPECT_EQ(FindLatestStep(root_)->step, 15);
  EXPECT_EQ(FindLatestStep(root_)->fallback, "");
  EXPECT_FALSE(FindLatestStep(root_ / "none"));
}

}  // namespace
}  // namespace headroom::checkpoint
