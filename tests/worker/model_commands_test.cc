// `headroom-worker logits` and `generate` as a user checks a port: their JSON output for the
// tiny models in tests/worker/fixtures/hf/ against the references make_fixtures.py wrote
// (expected.json: the equations in float64; expected_transformers.json: transformers itself,
// made on a machine that has it), and their refusals of directories they cannot use (exit 2, the file
// and the field or tensor named).
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hf/safetensors.h"
#include "core/protocol/exit_codes.h"
#include "tests/helpers/temp_dir.h"
#include "worker/cli/model_commands.h"

namespace headroom::worker {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path Fixture(const std::string& name) { return fs::path(HEADROOM_SOURCE_DIR) / "tests/worker/fixtures/hf" / name; }

struct Result {
  int code = -1;
  std::string out, err;
};

Result RunCommand(std::vector<std::string> args) {
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  Result r;
  r.code = RunModelCommand(static_cast<int>(argv.size()), argv.data(), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::string IdList(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// Both references of a fixture: expected.json (make_fixtures.py) and expected_transformers.json
// (make_fixtures.py --reference transformers). A missing one fails the test: a port checked
// against its own equations alone is not checked against the library users compare with.
std::vector<json> References(const std::string& name) {
  std::vector<json> refs;
  for (const char* file : {"expected.json", "expected_transformers.json"}) {
    std::ifstream in(Fixture(name) / file);
    EXPECT_TRUE(in.good()) << (Fixture(name) / file).string() << " is missing";
    if (in) refs.push_back(json::parse(in));
  }
  return refs;
}

class ModelCommandsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelCommandsTest, LogitsMatchEachReferenceWithin1e4) {
  for (const json& ref : References(GetParam())) {
    SCOPED_TRACE(GetParam() + " vs " + ref["reference"].get<std::string>());
    const auto r = RunCommand({"logits", "--model", Fixture(GetParam()).string(), "--ids", IdList(ref["ids"])});
    ASSERT_EQ(r.code, 0) << r.err;
    const json got = json::parse(r.out);
    const json& want = ref["logits"];
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;
    for (size_t t = 0; t < want.size(); ++t) {
      ASSERT_EQ(got[t].size(), want[t].size()) << "position " << t;
      for (size_t v = 0; v < want[t].size(); ++v) {
        worst = std::max(worst, std::abs(got[t][v].get<double>() - want[t][v].get<double>()));
      }
    }
    EXPECT_LT(worst, 1e-4) << "largest |logit difference|";
  }
}

TEST_P(ModelCommandsTest, GreedyIdsEqualEachReference) {
  for (const json& ref : References(GetParam())) {
    SCOPED_TRACE(GetParam() + " vs " + ref["reference"].get<std::string>());
    const auto r = RunCommand({"generate", "--model", Fixture(GetParam()).string(), "--ids", IdList(ref["ids"]),
                               "--max-new-tokens", std::to_string(ref["max_new_tokens"].get<int>())});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out), ref["greedy"]);
  }
}

// qwen2: Qwen2 biases, tied; qwen3: q/k norm, head_dim, bf16; llama3: llama3 rope, untied,
// sharded; llama3_v5: transformers 5.x rope_parameters, fp16.
INSTANTIATE_TEST_SUITE_P(Fixtures, ModelCommandsTest, ::testing::Values("qwen2", "qwen3", "llama3", "llama3_v5"));

void ExpectRefusal(const std::string& dir, const std::vector<std::string>& named) {
  const std::string model = Fixture("refusals/" + dir).string();
  for (const char* command : {"logits", "generate"}) {
    const auto r = RunCommand({command, "--model", model, "--ids", "1,2,3"});
    EXPECT_EQ(r.code, protocol::kExitInvalidSpec) << command << " " << dir << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    for (const auto& word : named) EXPECT_NE(r.err.find(word), std::string::npos) << "'" << word << "' in: " << r.err;
  }
}

TEST(ModelCommandsRefusals, UnsupportedArchitectureNamesFileAndField) {
  ExpectRefusal("bad_architecture", {"config.json", "architectures", "MistralForCausalLM"});
}

TEST(ModelCommandsRefusals, UnsupportedConfigDtypeNamesFileAndField) {
  ExpectRefusal("bad_config_dtype", {"config.json", "torch_dtype", "float8_e4m3fn"});
}

TEST(ModelCommandsRefusals, UnsupportedTensorDtypeNamesFileAndTensor) {
  ExpectRefusal("bad_dtype", {"model.safetensors", "model.norm.weight", "F64"});
}

TEST(ModelCommandsRefusals, MissingTensorIsNamed) {
  ExpectRefusal("missing_tensor", {"model.layers.0.mlp.up_proj.weight"});
}

TEST(ModelCommandsRefusals, MissingDirectoryIsNamed) {
  const auto r = RunCommand({"logits", "--model", "/nonexistent/model", "--ids", "1"});
  EXPECT_EQ(r.code, protocol::kExitInvalidSpec);
  EXPECT_NE(r.err.find("/nonexistent/model"), std::string::npos) << r.err;
}

TEST(ModelCommandsRefusals, BadIdsAreUsageErrors) {
  const std::string model = Fixture("qwen2").string();
  auto r = RunCommand({"logits", "--model", model, "--ids", "1,x"});
  EXPECT_EQ(r.code, protocol::kExitInvalidSpec);
  EXPECT_NE(r.err.find("'x'"), std::string::npos) << r.err;
  r = RunCommand({"generate", "--model", model, "--ids", "1,96", "--max-new-tokens", "2"});  // vocab_size 96
  EXPECT_EQ(r.code, protocol::kExitInvalidSpec);
  EXPECT_NE(r.err.find("vocab_size 96"), std::string::npos) << r.err;
  r = RunCommand({"logits", "--ids", "1"});  // --model is required
  EXPECT_EQ(r.code, protocol::kExitInvalidSpec);
  EXPECT_NE(r.err.find("--model"), std::string::npos) << r.err;
}

TEST(ModelCommands, GenerateStopsAfterTheEndOfSequenceId) {
  // Make the fixture's own first greedy id the end-of-sequence id of a copy.
  const json ref = References("qwen2").front();
  const int64_t first_new = ref["greedy"][ref["ids"].size()].get<int64_t>();
  const fs::path dir = fs::temp_directory_path() / ("headroom-eos-" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy(Fixture("qwen2"), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  std::ofstream(dir / "generation_config.json") << json{{"eos_token_id", {first_new, 0}}}.dump();
  const auto r =
      RunCommand({"generate", "--model", dir.string(), "--ids", IdList(ref["ids"]), "--max-new-tokens", "5"});
  fs::remove_all(dir);
  ASSERT_EQ(r.code, 0) << r.err;
  auto want = ref["ids"].get<std::vector<int64_t>>();
  want.push_back(first_new);
  EXPECT_EQ(json::parse(r.out).get<std::vector<int64_t>>(), want);
}

// A copy of fixture `name` in `dir`, its model.safetensors rewritten: `edit` may change the
// tensors' list and point any of them at bytes it keeps in `owned`.
using TensorEdit = std::function<void(std::vector<hf::TensorToWrite>&, std::vector<std::vector<float>>& owned)>;
std::string CopyWithTensors(const std::string& name, const fs::path& dir, const TensorEdit& edit) {
  fs::copy(Fixture(name), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  std::vector<hf::TensorToWrite> tensors;
  std::vector<std::vector<float>> owned;
  {
    const hf::SafetensorsFile source((Fixture(name) / "model.safetensors").string());
    for (const auto& [tensor, view] : source.tensors())
      tensors.push_back({tensor, view.dtype, view.shape, view.data, view.bytes});
    edit(tensors, owned);
    hf::WriteSafetensors((dir / "model.safetensors").string(), tensors);
  }
  return dir.string();
}

// stdout and the exit code of the worker binary, stderr apart (into `err`).
int RunWorker(const std::string& args, std::string& out, std::string& err) {
  const std::string err_file = (fs::temp_directory_path() / ("headroom-err-" + std::to_string(getpid()))).string();
  const std::string worker = std::string(HEADROOM_BINARY_DIR) + "/bin/headroom-worker";
  FILE* p = popen((worker + " " + args + " 2>" + err_file).c_str(), "r");
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int code = WEXITSTATUS(pclose(p));
  std::ifstream in(err_file);
  err.assign(std::istreambuf_iterator<char>(in), {});
  fs::remove(err_file);
  return code;
}

// Older exports carry rotary_emb.inv_freq beside the weights: the model loads with a
// warning, and the warning goes to stderr, so stdout stays one JSON document.
TEST(ModelCommands, AWarningNeverReachesStdout) {
  testing::TempDir dir("headroom-extra-tensor");
  std::vector<float> inv_freq(4, 0.5f);
  const std::string model = CopyWithTensors("qwen2", dir.path(), [&](auto& tensors, auto&) {
    tensors.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {4}, inv_freq.data(), 16});
  });
  for (const std::string command : {"logits --ids 1,2,3", "generate --ids 1,2 --max-new-tokens 2"}) {
    std::string out, err;
    ASSERT_EQ(RunWorker(command + " --model " + model, out, err), 0) << err;
    EXPECT_NO_THROW(json::parse(out)) << command << " printed: " << out;
    EXPECT_NE(err.find("not parameters of Qwen2ForCausalLM"), std::string::npos) << err;
  }
}

TEST(ModelCommandsRefusals, ANonFiniteWeightIsNamed) {
  testing::TempDir dir("headroom-nan-weights");
  const std::string model = CopyWithTensors("qwen2", dir.path(), [](auto& tensors, auto& owned) {
    for (auto& t : tensors) {
      if (t.name != "model.layers.1.mlp.up_proj.weight") continue;
      owned.emplace_back(t.bytes / sizeof(float), 0.01f);
      owned.back()[7] = std::nanf("");
      t.data = owned.back().data();
    }
  });
  for (const char* command : {"logits", "generate"}) {
    const auto r = RunCommand({command, "--model", model, "--ids", "1,2,3"});
    EXPECT_EQ(r.code, protocol::kExitInvalidSpec) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find("model.safetensors: tensor model.layers.1.mlp.up_proj.weight holds NaN (element 7)"),
              std::string::npos)
        << r.err;
  }
}

// A vocab_size of 2^40 is refused from config.json, before anything is allocated for it.
TEST(ModelCommandsRefusals, AnAbsurdVocabularyIsRefusedBeforeAllocating) {
  testing::TempDir dir("headroom-huge-vocab");
  fs::copy(Fixture("qwen2"), dir.path(), fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  json config = json::parse(std::ifstream(fs::path(dir.path()) / "config.json"));
  config["vocab_size"] = int64_t{1} << 40;
  std::ofstream(fs::path(dir.path()) / "config.json") << config.dump();
  const auto r = RunCommand({"logits", "--model", dir.path(), "--ids", "1"});
  EXPECT_EQ(r.code, protocol::kExitInvalidSpec) << r.err;
  EXPECT_NE(r.err.find("config.json: vocab_size: 1099511627776 is above"), std::string::npos) << r.err;
}

// The binary dispatches to the commands before its training options are parsed.
TEST(ModelCommands, TheWorkerBinaryRunsThem) {
  const std::string worker = std::string(HEADROOM_BINARY_DIR) + "/bin/headroom-worker";
  const auto run = [&](const std::string& args, std::string& out) {
    FILE* p = popen((worker + " " + args + " 2>&1").c_str(), "r");
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    return WEXITSTATUS(pclose(p));
  };
  std::string out;
  ASSERT_EQ(run("generate --model " + Fixture("llama3").string() + " --ids 3,17 --max-new-tokens 3", out), 0) << out;
  EXPECT_EQ(json::parse(out).size(), 5u) << out;
  out.clear();
  EXPECT_EQ(run("logits --model " + Fixture("refusals/bad_architecture").string() + " --ids 1", out),
            protocol::kExitInvalidSpec);
  EXPECT_NE(out.find("architectures"), std::string::npos) << out;
}

}  // namespace
}  // namespace headroom::worker
