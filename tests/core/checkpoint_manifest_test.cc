// manifest.json on its own: JSON round trip, base64 for opaque bytes, and every tiling
// error named with the tensor and the elements at fault.
#include <gtest/gtest.h>

#include "core/checkpoint/base64.h"
#include "core/checkpoint/checkpoint_error.h"
#include "core/checkpoint/checkpoint_layout.h"
#include "core/checkpoint/checkpoint_manifest.h"

namespace headroom::checkpoint {
namespace {

CheckpointManifest TwoShardManifest() {
  CheckpointManifest m;
  m.step = 120;
  m.world_size = 2;
  m.spec_hash = "abc";
  m.data_cursor = {{"next_prompt", 3840}};
  m.rng_state = {std::string("\0\1\2", 3), "r1"};
  m.file_bytes = {{"rank-00000.bin", 40}, {"rank-00001.bin", 40}};
  TensorEntry w;
  w.dtype = "float32";
  w.shape = {4, 5};
  w.shards = {{"rank-00001.bin", 10, 10, 0}, {"rank-00000.bin", 0, 10, 0}};
  m.tensors["w"] = w;
  return m;
}

std::string ValidateError(CheckpointManifest m) {
  try {
    m.Validate("M");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

TEST(Base64, RoundTripsEveryLengthAndRejectsGarbage) {
  std::string bytes;
  for (int i = 0; i < 300; ++i) {
    EXPECT_EQ(Base64Decode(Base64Encode(bytes)), bytes) << i;
    bytes += static_cast<char>(i * 37);
  }
  EXPECT_EQ(Base64Encode("hello"), "aGVsbG8=");
  EXPECT_THROW(Base64Decode("abc"), CheckpointError);
  EXPECT_THROW(Base64Decode("ab!d"), CheckpointError);
  EXPECT_THROW(Base64Decode("a=bc"), CheckpointError);
}

TEST(CheckpointManifest, JsonRoundTripKeepsEverything) {
  auto m = TwoShardManifest();
  m.Validate("M");
  EXPECT_EQ(m.tensors["w"].shards[0].file, "rank-00000.bin");  // sorted by offset
  auto back = CheckpointManifest::FromJson(nlohmann::json::parse(m.ToJson().dump()), "M");
  EXPECT_EQ(back.step, 120);
  EXPECT_EQ(back.world_size, 2);
  EXPECT_EQ(back.spec_hash, "abc");
  EXPECT_EQ(back.data_cursor["next_prompt"], 3840);
  EXPECT_EQ(back.rng_state, m.rng_state);
  EXPECT_EQ(back.file_bytes, m.file_bytes);
  EXPECT_EQ(back.tensors["w"].shape, std::vector<int64_t>({4, 5}));
  EXPECT_EQ(back.tensors["w"].shards.size(), 2u);
  EXPECT_EQ(m.ToJson()["format"], "headroom-checkpoint/1");
}

TEST(CheckpointManifest, TilingErrorsNameTheTensorAndElements) {
  auto gap = TwoShardManifest();
  gap.tensors["w"].shards[0].offset = 11;  // rank 1's shard moves up one element
  EXPECT_NE(
      ValidateError(gap).find("tensor 'w': shards do not tile its 20 elements: elements [10, 11) are in no shard"),
      std::string::npos)
      << ValidateError(gap);

  auto overlap = TwoShardManifest();
  overlap.tensors["w"].shards[0].offset = 9;
  EXPECT_NE(ValidateError(overlap).find("overlaps the previous one"), std::string::npos) << ValidateError(overlap);

  auto short_cover = TwoShardManifest();
  short_cover.tensors["w"].shape = {4, 6};
  EXPECT_NE(ValidateError(short_cover).find("shards cover 20 of its 24 elements"), std::string::npos);

  auto past_end = TwoShardManifest();
  past_end.file_bytes["rank-00001.bin"] = 39;
  EXPECT_NE(ValidateError(past_end).find("runs past the file's 39 bytes"), std::string::npos);

  auto unknown = TwoShardManifest();
  unknown.tensors["w"].shards[1].file = "rank-00007.bin";
  EXPECT_NE(ValidateError(unknown).find("unknown file 'rank-00007.bin'"), std::string::npos);
}

TEST(CheckpointManifest, MalformedJsonFieldsAreNamed) {
  auto json = TwoShardManifest().ToJson();
  json.erase("spec_hash");
  try {
    CheckpointManifest::FromJson(json, "DIR/manifest.json");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_STREQ(e.what(), "DIR/manifest.json: missing field 'spec_hash'");
  }
  json = TwoShardManifest().ToJson();
  json["format"] = "something-else/9";
  EXPECT_THROW(CheckpointManifest::FromJson(json, "M"), CheckpointError);
  json = TwoShardManifest().ToJson();
  json["tensors"]["w"]["dtype"] = "complex128";
  EXPECT_THROW(CheckpointManifest::FromJson(json, "M"), CheckpointError);
}

TEST(CheckpointDirectory, NamesParseBothWays) {
  EXPECT_EQ(StepDirName(120), "step-000120");
  EXPECT_EQ(StepDirName(12345678), "step-12345678");
  EXPECT_EQ(RankFileName(3), "rank-00003.bin");
  EXPECT_EQ(ParseStepDirName("step-000120"), 120);
  EXPECT_FALSE(ParseStepDirName("step-000120.partial").has_value());
  EXPECT_FALSE(ParseStepDirName("step-12").has_value());
  EXPECT_FALSE(ParseStepDirName("latest").has_value());
}

}  // namespace
}  // namespace headroom::checkpoint
