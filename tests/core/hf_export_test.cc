// ExportCheckpoint: a checkpoint written in the worker's format (fp32 master weights in
// shards over rank files, "model." + the Hugging Face name) back into the source model's
// layout: the same names, dtypes, shapes and bytes, config.json unchanged, sharded with an
// index above the size limit.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/checkpoint/sha256.h"
#include "core/hf/hf_export.h"
#include "core/hf/safetensors.h"
#include "tests/helpers/run_command.h"

namespace headroom::hf {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path Fixture(const std::string& name) { return fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf" / name; }

class Scratch {
 public:
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "headroom-export-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~Scratch() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

float Decode(const TensorView& v, size_t i) {
  uint16_t h;
  if (v.dtype == "F32") {
    float f;
    std::memcpy(&f, v.data + 4 * i, 4);
    return f;
  }
  std::memcpy(&h, v.data + 2 * i, 2);
  if (v.dtype == "BF16") {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  // F16: sign, 5-bit exponent, 10-bit mantissa (the fixtures hold no inf/NaN).
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const float mag =
      exp == 0 ? std::ldexp(static_cast<float>(mant), -24) : std::ldexp(static_cast<float>(mant + 1024), exp - 25);
  return (h & 0x8000) ? -mag : mag;
}

std::string ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A checkpoint root holding the fixture's weights as the worker saves them: fp32, every
// tensor split in two shards over two rank files, `latest` naming the step.
fs::path WriteCheckpoint(const fs::path& root, const std::string& fixture, bool record_model_path = true,
                         const std::string& skip = "") {
  const SafetensorsModel model(Fixture(fixture).string());
  const fs::path step = root / "step-000003";
  fs::create_directories(step);
  std::ofstream rank[2] = {std::ofstream(step / "rank-00000.bin", std::ios::binary),
                           std::ofstream(step / "rank-00001.bin", std::ios::binary)};
  int64_t written[2] = {0, 0};
  json tensors = json::object();
  for (const auto& [name, view] : model.tensors()) {
    if (name == skip) continue;
    const size_t numel = view.bytes / DtypeSize(view.dtype);
    std::vector<float> values(numel);
    for (size_t i = 0; i < numel; ++i) values[i] = Decode(view, i);
    const int64_t half = static_cast<int64_t>(numel) / 2;
    json shards = json::array();
    for (int r = 0; r < 2; ++r) {
      const int64_t begin = r == 0 ? 0 : half, n = r == 0 ? half : static_cast<int64_t>(numel) - half;
      shards.push_back({{"file", "rank-0000" + std::to_string(r) + ".bin"},
                        {"offset", begin},
                        {"numel", n},
                        {"file_offset", written[r]}});
      rank[r].write(reinterpret_cast<const char*>(values.data() + begin), n * 4);
      written[r] += n * 4;
    }
    tensors["model." + name] = {{"dtype", "float32"}, {"shape", view.shape}, {"shards", shards}};
  }
  rank[0].close();
  rank[1].close();
  json manifest = {
      {"format", "headroom-checkpoint/1"},
      {"step", 3},
      {"world_size", 2},
      {"spec_hash", "h"},
      {"rng_state", json::array({"", ""})},
      {"tensors", tensors},
      {"extra", json::object()},
      {"files", {{"rank-00000.bin", {{"bytes", written[0]}}}, {"rank-00001.bin", {{"bytes", written[1]}}}}}};
  if (record_model_path) manifest["extra"]["model_path"] = Fixture(fixture).string();
  std::ofstream(step / "manifest.json") << manifest.dump();
  std::ofstream(root / "latest") << "step-000003\n";
  return root;
}

void ExpectSameModel(const fs::path& exported, const std::string& fixture) {
  const SafetensorsModel source(Fixture(fixture).string()), out(exported.string());
  ASSERT_EQ(out.tensors().size(), source.tensors().size());
  for (const auto& [name, view] : source.tensors()) {
    ASSERT_TRUE(out.Has(name)) << name;
    const TensorView& got = out.Get(name);
    EXPECT_EQ(got.dtype, view.dtype) << name;
    EXPECT_EQ(got.shape, view.shape) << name;
    ASSERT_EQ(got.bytes, view.bytes) << name;
    EXPECT_EQ(std::memcmp(got.data, view.data, view.bytes), 0) << name << ": bytes differ";
  }
  EXPECT_EQ(ReadText(exported / "config.json"), ReadText(Fixture(fixture) / "config.json"));
}

class HfExportTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfExportTest, RoundTripsNamesDtypesShapesAndBytes) {
  Scratch dir;
  const fs::path root = WriteCheckpoint(dir.path() / "ckpt", GetParam());
  const ExportSummary s = ExportCheckpoint(root.string(), (dir.path() / "out").string());
  EXPECT_EQ(s.model_dir, Fixture(GetParam()).string());
  EXPECT_EQ(s.files.front(), "model.safetensors");
  EXPECT_FALSE(fs::exists(dir.path() / "out" / "model.safetensors.index.json"));
  ExpectSameModel(dir.path() / "out", GetParam());
}

// F32 (and sharded source), BF16, F16.
INSTANTIATE_TEST_SUITE_P(Fixtures, HfExportTest, ::testing::Values("qwen2", "llama3", "qwen3", "llama3_v5"));

TEST(HfExport, AboveTheShardLimitWritesShardsAndAnIndex) {
  Scratch dir;
  const fs::path root = WriteCheckpoint(dir.path() / "ckpt", "qwen2");
  const ExportSummary s = ExportCheckpoint((root / "step-000003").string(), (dir.path() / "out").string(),
                                           Fixture("qwen2").string(), /*max_shard_bytes=*/20000);
  ASSERT_TRUE(fs::exists(dir.path() / "out" / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir.path() / "out" / "model.safetensors"));
  const json index = json::parse(ReadText(dir.path() / "out" / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"].get<int64_t>(), s.tensor_bytes);
  EXPECT_GT(s.files.size(), 3u);
  EXPECT_TRUE(fs::exists(dir.path() / "out" / s.files.front())) << s.files.front();
  ExpectSameModel(dir.path() / "out", "qwen2");
}

TEST(HfExport, RefusalsNameWhatIsMissing) {
  Scratch dir;
  const fs::path a = WriteCheckpoint(dir.path() / "a", "qwen2", true, "model.norm.weight");
  try {
    ExportCheckpoint(a.string(), (dir.path() / "out").string());
    FAIL() << "exported a checkpoint without model.norm.weight";
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("model.model.norm.weight"), std::string::npos) << e.what();
  }
  const fs::path b = WriteCheckpoint(dir.path() / "b", "qwen2", /*record_model_path=*/false);
  try {
    ExportCheckpoint(b.string(), (dir.path() / "out").string());
    FAIL() << "exported without knowing the source model";
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("extra.model_path"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ExportCheckpoint((dir.path() / "nothing").string(), (dir.path() / "out").string()), ExportError);
}

// The export appears whole or not at all: written beside the target as DIR.partial and
// renamed; a previous export (a model directory) is replaced, a leftover partial is
// cleared, a failure leaves the target as it was, and a directory that is not a model is
// never replaced.
TEST(HfExport, IsAtomicAndReplacesOnlyAModelDirectory) {
  Scratch dir;
  const fs::path root = WriteCheckpoint(dir.path() / "ckpt", "qwen2");
  const fs::path out = dir.path() / "out";
  fs::create_directories(dir.path() / "out.partial");
  std::ofstream(dir.path() / "out.partial" / "model.safetensors") << "half-written";
  ExportCheckpoint(root.string(), out.string());
  EXPECT_FALSE(fs::exists(dir.path() / "out.partial"));
  ExpectSameModel(out, "qwen2");

  // Again over the first export (which its marker says the export wrote): replaced whole.
  ASSERT_TRUE(fs::exists(out / kExportMarkerFileName));
  const json marker = json::parse(ReadText(out / kExportMarkerFileName));
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (name != kExportMarkerFileName) {
      EXPECT_NE(std::find(marker["files"].begin(), marker["files"].end(), name), marker["files"].end()) << name;
    }
  }
  ExportCheckpoint(root.string(), (out.string() + "/"));
  ExpectSameModel(out, "qwen2");

  // A failure (a tensor missing from the checkpoint) leaves the previous export intact.
  const fs::path broken = WriteCheckpoint(dir.path() / "broken", "qwen2", true, "model.norm.weight");
  EXPECT_THROW(ExportCheckpoint(broken.string(), out.string()), ExportError);
  EXPECT_FALSE(fs::exists(dir.path() / "out.partial"));
  ExpectSameModel(out, "qwen2");

  // A directory the export did not write: refused, untouched.
  const fs::path other = dir.path() / "notes";
  fs::create_directories(other);
  std::ofstream(other / "todo.txt") << "mine";
  try {
    ExportCheckpoint(root.string(), other.string());
    FAIL() << "replaced a directory the export did not write";
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("was not written by headroom export"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ReadText(other / "todo.txt"), "mine");
  EXPECT_FALSE(fs::exists(dir.path() / "notes.partial"));
}

// A model directory someone else owns (config.json, weights, README.md, .git/) is never
// replaced: not even an earlier export once a file it did not write sits in it, and above
// all not the source model itself, however it is named.
TEST(HfExport, WritesOnlyWhatItOwns) {
  Scratch dir;
  const fs::path source = dir.path() / "source";
  fs::copy(Fixture("qwen2"), source);
  fs::create_directories(source / ".git");
  std::ofstream(source / ".git" / "HEAD") << "ref: refs/heads/main\n";
  std::ofstream(source / "README.md") << "the model card";
  const fs::path root = WriteCheckpoint(dir.path() / "ckpt", "qwen2");
  const auto refused = [&](const fs::path& to, const std::string& says) {
    try {
      ExportCheckpoint(root.string(), to.string(), source.string());
      ADD_FAILURE() << "exported over " << to;
    } catch (const ExportError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused(source, "is the source model's directory");
  refused(source / ".." / "source" / "", "is the source model's directory");
  fs::create_directory_symlink(source, dir.path() / "link");
  refused(dir.path() / "link", "is the source model's directory");
  refused(dir.path(), "a directory holding the source model");
  refused(root, "holds the checkpoint being exported");
  EXPECT_EQ(ReadText(source / "README.md"), "the model card");
  EXPECT_TRUE(fs::exists(source / ".git" / "HEAD"));
  EXPECT_EQ(ReadText(source / "model.safetensors"), ReadText(Fixture("qwen2") / "model.safetensors"));

  // Another model directory (a copy someone keeps notes in) is not the export's either.
  const fs::path copy = dir.path() / "copy";
  fs::copy(Fixture("qwen2"), copy);
  refused(copy, "was not written by headroom export (no .headroom-export.json)");
  // An earlier export with a file added since: refused, naming the file.
  const fs::path out = dir.path() / "out";
  ExportCheckpoint(root.string(), out.string(), source.string());
  std::ofstream(out / "NOTES.md") << "my notes on the fine-tune";
  refused(out, (out / "NOTES.md").string() + " was not written by headroom export");
  EXPECT_EQ(ReadText(out / "NOTES.md"), "my notes on the fine-tune");
}

// Every file of the step is checked against the sha256 its manifest records: a flipped
// bit is refused, naming the file, and nothing is written.
TEST(HfExport, RefusesACheckpointThatFailsItsChecksum) {
  Scratch dir;
  const fs::path root = WriteCheckpoint(dir.path() / "ckpt", "qwen2");
  const fs::path step = root / "step-000003";
  json manifest = json::parse(ReadText(step / "manifest.json"));
  for (const char* file : {"rank-00000.bin", "rank-00001.bin"}) {
    manifest["files"][file] = {{"bytes", fs::file_size(step / file)}, {"sha256", checkpoint::FileSha256(step / file)}};
  }
  std::ofstream(step / "manifest.json") << manifest.dump();
  ExportCheckpoint(root.string(), (dir.path() / "good").string());  // intact: exported
  {
    std::fstream f(step / "rank-00001.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  try {
    ExportCheckpoint(root.string(), (dir.path() / "out").string());
    FAIL() << "exported a bit-flipped checkpoint";
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("rank-00001.bin is corrupt"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir.path() / "out"));
  EXPECT_FALSE(fs::exists(dir.path() / "out.partial"));
}

// The manifest's model_path is absolute (the worker resolves it when saving), so the
// export works from any working directory; a relative one, from an older checkpoint, is
// refused with what to do instead of being resolved against the wrong directory.
TEST(HfExport, ARelativeModelPathIsRefusedClearly) {
  Scratch dir;
  const fs::path root = WriteCheckpoint(dir.path() / "ckpt", "qwen2");
  const fs::path manifest_path = root / "step-000003" / "manifest.json";
  json manifest = json::parse(ReadText(manifest_path));
  manifest["extra"]["model_path"] = "models/qwen2";
  std::ofstream(manifest_path) << manifest.dump();
  try {
    ExportCheckpoint(root.string(), (dir.path() / "out").string());
    FAIL() << "resolved a relative model_path";
  } catch (const ExportError& e) {
    EXPECT_NE(std::string(e.what()).find("extra.model_path: 'models/qwen2' is relative"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--model"), std::string::npos) << e.what();
  }
  ExportCheckpoint(root.string(), (dir.path() / "out").string(), Fixture("qwen2").string());
  ExpectSameModel(dir.path() / "out", "qwen2");
}

// Source tensors the model does not train are not in the checkpoint: an `inv_freq` buffer
// is copied as it was, and the untied `lm_head.weight` of a model whose config ties its
// head gets the trained embedding; the export has exactly the source's tensors.
TEST(HfExport, UntrainedSourceTensorsAreCarriedOver) {
  Scratch dir;
  const fs::path source = dir.path() / "source";
  fs::create_directories(source);
  fs::copy_file(Fixture("qwen2") / "config.json", source / "config.json");  // ties its head
  const SafetensorsModel fixture(Fixture("qwen2").string());
  std::vector<TensorToWrite> tensors;
  for (const auto& [name, view] : fixture.tensors())
    tensors.push_back({name, view.dtype, view.shape, view.data, view.bytes});
  std::vector<float> inv_freq(4);
  for (size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] = std::pow(10000.0f, -static_cast<float>(2 * i) / 8);
  tensors.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {4}, inv_freq.data(), 16});
  const TensorView& embed = fixture.Get("model.embed_tokens.weight");
  std::vector<float> stale_head(embed.bytes / 4, 0.25f);
  tensors.push_back({"lm_head.weight", embed.dtype, embed.shape, stale_head.data(), embed.bytes});
  WriteSafetensors((source / "model.safetensors").string(), tensors);

  // The checkpoint holds only what the model trains: the fixture's own tensors.
  const fs::path root = WriteCheckpoint(dir.path() / "ckpt", "qwen2");
  const ExportSummary s = ExportCheckpoint(root.string(), (dir.path() / "out").string(), source.string());
  EXPECT_EQ(s.copied_from_source, std::vector<std::string>{"model.layers.0.self_attn.rotary_emb.inv_freq"});
  EXPECT_EQ(s.tied_to_trained, std::vector<std::string>{"lm_head.weight"});
  const SafetensorsModel out((dir.path() / "out").string());
  EXPECT_EQ(out.tensors().size(), tensors.size());
  const TensorView& freq = out.Get("model.layers.0.self_attn.rotary_emb.inv_freq");
  EXPECT_EQ(std::memcmp(freq.data, inv_freq.data(), 16), 0);
  const TensorView& head = out.Get("lm_head.weight");
  const TensorView& trained = out.Get("model.embed_tokens.weight");
  ASSERT_EQ(head.bytes, trained.bytes);
  EXPECT_EQ(std::memcmp(head.data, trained.data, head.bytes), 0) << "the head is the trained embedding";
  // Any other tensor missing from the checkpoint is still refused (not a model it trained).
  const fs::path broken = WriteCheckpoint(dir.path() / "broken", "qwen2", true, "model.norm.weight");
  EXPECT_THROW(ExportCheckpoint(broken.string(), (dir.path() / "out2").string(), source.string()), ExportError);
}

// `headroom export` (the binary): exit 0 and the directory; exit 2 naming what is missing.
TEST(HfExport, TheHeadroomCommand) {
  Scratch dir;
  const auto run = [](const std::string& args) {
    return headroom::testing::RunCommand(std::string(HEADROOM_BINARY_DIR) + "/bin/headroom export " + args);
  };
  const fs::path root = WriteCheckpoint(dir.path() / "ckpt", "qwen3");
  const headroom::testing::CommandResult exported = run(root.string() + " --to " + (dir.path() / "out").string());
  ASSERT_EQ(exported.code, 0) << exported.out;
  ExpectSameModel(dir.path() / "out", "qwen3");
  const fs::path broken = WriteCheckpoint(dir.path() / "broken", "qwen3", true, "lm_head.weight");
  fs::remove(broken / "step-000003" / "manifest.json");
  const headroom::testing::CommandResult refused = run(broken.string() + " --to " + (dir.path() / "out2").string());
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("manifest.json"), std::string::npos) << refused.out;
}

TEST(HfExport, HalfPrecisionRoundsToNearestEven) {
  EXPECT_EQ(Bf16FromFloat(1.0f), 0x3f80);
  EXPECT_EQ(Bf16FromFloat(0.1f), 0x3dcd);  // 0x3dcccccd rounds up
  EXPECT_EQ(Bf16FromFloat(-2.0f), 0xc000);
  EXPECT_EQ(F16FromFloat(1.0f), 0x3c00);
  EXPECT_EQ(F16FromFloat(0.1f), 0x2e66);
  EXPECT_EQ(F16FromFloat(65504.0f), 0x7bff);  // the largest half
  EXPECT_EQ(F16FromFloat(1e6f), 0x7c00);      // overflow: inf
  EXPECT_EQ(F16FromFloat(1e-7f), 0x0002);     // a subnormal: 1e-7 / 2^-24 = 1.68 -> 2
  EXPECT_EQ(F16FromFloat(-0.0f), 0x8000);
  EXPECT_EQ(F16FromFloat(1.0f + 1.0f / 2048), 0x3c00);  // exactly halfway, to even
  EXPECT_EQ(F16FromFloat(1.0f + 3.0f / 2048), 0x3c02);  // halfway, up to even
}

}  // namespace
}  // namespace headroom::hf
