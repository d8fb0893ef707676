// TextTask on the example job's files (configs/models/qwen2-tiny-addition,
// configs/data/addition-text): prompts are the tokenizer's encoding of the rendered chat
// prompt of the record DatasetOrder picks, long prompts are dropped and counted, responses
// are scored on their text up to the stop token, bad input is an invalid_argument naming the
// field and file; and the worker refuses to resume a checkpoint made on other dataset
// contents (exit 2).
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/protocol/step_record.h"
#include "core/spec/training_job.h"
#include "tests/helpers/temp_dir.h"
#include "tests/worker/helpers/example_text_task.h"
#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/model/model_source.h"
#include "worker/tasks/chat_prompt.h"
#include "worker/tasks/jsonl_dataset.h"
#include "worker/tasks/task_factory.h"
#include "worker/tasks/text_reward.h"
#include "worker/tasks/text_task.h"
#include "worker/tokenizer/hf_tokenizer.h"

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;

const std::string kSource = HEADROOM_SOURCE_DIR;
const std::string kModel = kSource + "/configs/models/qwen2-tiny-addition";
const std::string kTrain = kSource + "/configs/data/addition-text/train.jsonl";

spec::TrainingJobSpec ExampleSpec() {
  spec::TrainingJobSpec s;
  s.model.path = kModel;
  s.task.seed = 7;
  headroom::testing::UseExampleTextTask(s);
  s.task.prompt.system = "Answer with a number.";
  s.grpo.max_prompt_length = 512;
  s.grpo.max_response_length = 12;
  return s;
}

// The task the trainer builds for `s`, with the model's tokens read by a ModelSource.
std::unique_ptr<Task> TaskOf(const spec::TrainingJobSpec& s) { return MakeTask(s, ModelSource(s)); }

// What the task should hold, computed from the parts it joins.
struct Reference {
  HfTokenizer tokenizer = HfTokenizer::Load(kModel);
  JsonlDataset dataset = JsonlDataset::Load(kTrain, "question", "answer");
  std::vector<int64_t> Ids(const spec::TrainingJobSpec& s, const std::string& prompt) const {
    PromptFormat f;
    f.kind = *ParsePromptFormatKind(s.task.prompt.format);
    f.system = s.task.prompt.system;
    return tokenizer.Encode(RenderPrompt(f, prompt, tokenizer.bos_token().value_or("")));
  }
};

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TextTask, PromptsAreTheTokenizedChatPromptsOfTheRecordsInDatasetOrder) {
  const spec::TrainingJobSpec s = ExampleSpec();
  const std::unique_ptr<Task> task = TaskOf(s);
  ASSERT_EQ(task->name(), "text");
  const Reference ref;
  const auto& text = dynamic_cast<const TextTask&>(*task);
  ASSERT_EQ(text.size(), ref.dataset.size());
  EXPECT_EQ(text.prompts_filtered(), 0);

  const DatasetOrder order(ref.dataset.size(), s.task.seed);
  int64_t longest = 0;
  for (int64_t i = 0; i < ref.dataset.size(); ++i) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(ref.Ids(s, ref.dataset[i].prompt).size()));
  }
  EXPECT_EQ(task->prompt_tokens(), longest);
  EXPECT_EQ(task->answer_tokens(), s.grpo.max_response_length);
  std::set<size_t> lengths;
  for (uint64_t g : {0ull, 1ull, 2ull, 1999ull, 2000ull, 4321ull}) {
    const Problem p = task->Make(g);
    const DatasetRecord& r = ref.dataset[order.RecordAt(g)];
    EXPECT_EQ(p.prompt, r.prompt) << g;
    EXPECT_EQ(p.answer, r.answer) << g;
    EXPECT_EQ(p.prompt_tokens, ref.Ids(s, r.prompt)) << g;
    lengths.insert(p.prompt_tokens.size());
  }
  EXPECT_GT(lengths.size(), 1u) << "the example's prompts should differ in length";
  // The rendered prompt opens the assistant's turn, as special tokens, not their characters.
  const Problem p = task->Make(0);
  EXPECT_EQ(p.prompt_tokens.front(), *ref.tokenizer.TokenId("<|im_start|>"));
}

TEST(TextTask, StopsAtTheEosTokenAndTheGenerationConfigsAndPadsWithThePadToken) {
  const std::unique_ptr<Task> task = TaskOf(ExampleSpec());
  const Reference ref;
  const ResponseFormat f = task->response_format();
  std::vector<int64_t> expected = {*ref.tokenizer.TokenId(*ref.tokenizer.eos_token())};
  const nlohmann::json generation = ReadJson(kModel + "/generation_config.json");
  for (const auto& id : generation["eos_token_id"]) {
    if (std::find(expected.begin(), expected.end(), id.get<int64_t>()) == expected.end()) {
      expected.push_back(id.get<int64_t>());
    }
  }
  EXPECT_EQ(f.stop_tokens, expected);
  EXPECT_EQ(f.pad, *ref.tokenizer.TokenId(*ref.tokenizer.pad_token()));
  EXPECT_TRUE(f.allowed.empty());
}

TEST(TextTask, ScoresTheDecodedTextUpToTheStopToken) {
  const std::unique_ptr<Task> task = TaskOf(ExampleSpec());
  const Reference ref;
  const auto& text = dynamic_cast<const TextTask&>(*task);
  const ResponseFormat f = task->response_format();
  Problem p;
  p.answer = "5 + 9 = 14\n#### 14";
  auto response = [&](const std::string& before, const std::string& after) {
    std::vector<int64_t> ids = ref.tokenizer.Encode(before);
    ids.push_back(f.stop_tokens.front());
    for (int64_t id : ref.tokenizer.Encode(after)) ids.push_back(id);
    while (ids.size() < 24) ids.push_back(f.pad);
    return ids;
  };
  const auto right = response("5 + 9 = 14", "");
  EXPECT_EQ(text.ResponseText(right.data(), static_cast<int64_t>(right.size())), "5 + 9 = 14");
  EXPECT_EQ(task->Score(p, right.data(), static_cast<int64_t>(right.size())),
            ScoreTextAnswer(TextReward::kGsm8k, "5 + 9 = 14", p.answer));
  EXPECT_EQ(task->Score(p, right.data(), static_cast<int64_t>(right.size())), 1.0);
  // What follows the stop token is not part of the answer.
  const auto after_stop = response("The sum is 13", " no, 14");
  EXPECT_EQ(task->Score(p, after_stop.data(), static_cast<int64_t>(after_stop.size())), 0.0);
  // Special tokens inside the response are skipped; ids the tokenizer lacks decode to nothing.
  std::vector<int64_t> odd = ref.tokenizer.Encode("1");
  odd.push_back(*ref.tokenizer.TokenId("<|im_start|>"));
  odd.push_back(ref.tokenizer.vocab_size() + 3);
  for (int64_t id : ref.tokenizer.Encode("4")) odd.push_back(id);
  EXPECT_EQ(text.ResponseText(odd.data(), static_cast<int64_t>(odd.size())), "14");
  EXPECT_EQ(task->Score(p, odd.data(), static_cast<int64_t>(odd.size())), 1.0);
}

TEST(TextTask, DropsAndCountsPromptsLongerThanMaxPromptLength) {
  spec::TrainingJobSpec s = ExampleSpec();
  const Reference ref;
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < ref.dataset.size(); ++i) lengths.push_back(ref.Ids(s, ref.dataset[i].prompt).size());
  std::vector<int64_t> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  s.grpo.max_prompt_length = sorted[sorted.size() / 2];  // the median: about half dropped
  const int64_t dropped =
      std::count_if(lengths.begin(), lengths.end(), [&](int64_t n) { return n > s.grpo.max_prompt_length; });
  ASSERT_GT(dropped, 0);
  const std::unique_ptr<Task> task = TaskOf(s);
  const auto& text = dynamic_cast<const TextTask&>(*task);
  EXPECT_EQ(text.prompts_filtered(), dropped);
  EXPECT_EQ(text.size(), ref.dataset.size() - dropped);
  EXPECT_LE(task->prompt_tokens(), s.grpo.max_prompt_length);
  for (uint64_t g = 0; g < 300; ++g) {
    EXPECT_LE(static_cast<int64_t>(task->Make(g).prompt_tokens.size()), s.grpo.max_prompt_length);
  }
  EXPECT_EQ(task->DatasetAt(0)->prompts_filtered, dropped);
}

TEST(TextTask, DatasetAtIsTheEpochAndCursorOfDatasetOrderAndTheContentHash) {
  const spec::TrainingJobSpec s = ExampleSpec();
  const std::unique_ptr<Task> task = TaskOf(s);
  const Reference ref;
  const DatasetOrder order(ref.dataset.size(), s.task.seed);
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(ref.dataset.content_hash()));
  for (uint64_t g : {0ull, 17ull, 2000ull, 4007ull}) {
    const auto state = task->DatasetAt(g);
    ASSERT_TRUE(state);
    EXPECT_EQ(state->path, kTrain);
    EXPECT_EQ(state->content_hash, hash);
    EXPECT_EQ(state->epoch, order.Epoch(g));
    EXPECT_EQ(state->cursor, order.Cursor(g));
  }
  spec::TrainingJobSpec generated;
  EXPECT_FALSE(TaskOf(generated)->DatasetAt(5)) << "generated tasks have no dataset";
}

TEST(TextTask, HeldOutIsTheHeldOutFileInOrderWithLongPromptsDropped) {
  spec::TrainingJobSpec s = ExampleSpec();
  const std::string held = kSource + "/configs/data/addition-text/heldout.jsonl";
  EXPECT_TRUE(TaskOf(s)->HeldOut().empty()) << "no heldOut file, no held-out problems";
  s.task.dataset.held_out = held;
  const Reference ref;
  const JsonlDataset file = JsonlDataset::Load(held, "question", "answer");
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < file.size(); ++i) lengths.push_back(ref.Ids(s, file[i].prompt).size());
  std::vector<int64_t> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  s.grpo.max_prompt_length = sorted[sorted.size() / 2];
  const std::unique_ptr<Task> task = TaskOf(s);
  const std::vector<Problem>& problems = task->HeldOut();
  size_t k = 0;
  for (int64_t i = 0; i < file.size(); ++i) {
    if (lengths[i] > s.grpo.max_prompt_length) continue;
    ASSERT_LT(k, problems.size());
    EXPECT_EQ(problems[k].prompt, file[i].prompt);
    EXPECT_EQ(problems[k].answer, file[i].answer);
    EXPECT_EQ(problems[k].prompt_tokens, ref.Ids(s, file[i].prompt)) << "held-out line " << file[i].line;
    ++k;
  }
  EXPECT_EQ(k, problems.size());
  EXPECT_LT(problems.size(), static_cast<size_t>(file.size())) << "the median length should drop some";
}

// The message of the invalid_argument TaskOf(s) throws, or "" when it throws none.
std::string RefusalOf(const spec::TrainingJobSpec& s) {
  try {
    TaskOf(s);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(TextTask, BadInputIsAnInvalidArgumentNamingTheFieldAndFile) {
  headroom::testing::TempDir dir("text-task");
  spec::TrainingJobSpec s = ExampleSpec();
  s.model.path = dir.path() + "/nowhere";
  std::string why = RefusalOf(s);
  EXPECT_NE(why.find("spec.model.path"), std::string::npos) << why;
  EXPECT_NE(why.find("tokenizer.json"), std::string::npos) << why;

  s = ExampleSpec();
  const std::string broken = dir.path() + "/broken.jsonl";
  std::ofstream(broken) << "{\"question\": \"What is 1 + 1?\", \"answer\": \"#### 2\"}\n"
                        << "{\"question\": \"What is 2 + 2?\", \"answer\": \"#### 4\"}\n"
                        << "{\"question\": \"What is 3 + 3?\"\n";
  s.task.dataset.path = broken;
  why = RefusalOf(s);
  EXPECT_NE(why.find("spec.task.dataset.path"), std::string::npos) << why;
  EXPECT_NE(why.find(broken + ":3"), std::string::npos) << why;

  s = ExampleSpec();
  s.task.dataset.held_out = broken;
  why = RefusalOf(s);
  EXPECT_NE(why.find("spec.task.dataset.heldOut"), std::string::npos) << why;
  EXPECT_NE(why.find(broken + ":3"), std::string::npos) << why;

  s = ExampleSpec();
  s.grpo.max_prompt_length = 3;
  why = RefusalOf(s);
  EXPECT_NE(why.find("maxPromptLength"), std::string::npos) << why;

  s = ExampleSpec();
  s.task.reward.name = "bleu";
  why = RefusalOf(s);
  EXPECT_NE(why.find("spec.task.reward.name"), std::string::npos) << why;
}

// headroom-worker on a copy of the example job: the dataset changes between a checkpoint and
// the resume.
class TextTaskWorkerTest : public ::testing::Test {
 protected:
  std::string WriteJob(const std::string& dataset, int steps, const std::string& held_out = "") {
    const std::string path = dir_.path() + "/job.yaml";
    std::ofstream(path) << "apiVersion: headroom.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: text}\n"
                           "spec:\n  workers: 1\n  resources: {cpu: \"1\", memory: 2Gi}\n"
                           "  model: {path: "
                        << kModel
                        << "}\n"
                           "  task:\n    seed: 3\n    dataset: {path: "
                        << dataset << (held_out.empty() ? "" : ", heldOut: " + held_out)
                        << "}\n"
                           "    prompt: {format: chatml}\n    reward: {name: gsm8k}\n"
                           "  grpo: {steps: "
                        << steps
                        << ", promptsPerStep: 4, groupSize: 2, maxPromptLength: 64,"
                           " maxResponseLength: 4, microBatchSize: 8, learningRate: 0.001, klCoef: 0.0}\n"
                           "  sharding: {stage: 0}\n  checkpoint: {everySteps: 1, keep: 3}\n"
                           "  memoryGuard: {enabled: false}\n";
    return path;
  }
  // Exit code of the worker; its stderr in *err.
  int RunWorker(const std::string& job, const std::string& env, std::string* err) {
    const std::string err_path = dir_.path() + "/stderr";
    const std::string cmd = env + " " + std::string(HEADROOM_BINARY_DIR) + "/bin/headroom-worker --job " + job +
                            " --checkpoint-dir " + dir_.path() + "/ckpt --metrics-port -1 --log " + dir_.path() +
                            "/log.jsonl 2> " + err_path;
    const int status = std::system(cmd.c_str());
    *err = ReadAll(err_path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  headroom::testing::TempDir dir_{"text-task-worker"};
};

TEST_F(TextTaskWorkerTest, ResumeOnChangedDatasetContentsIsRefusedWith2) {
  // One phrasing, so every prompt has the same length (this test is about the dataset's
  // identity, not padding).
  const std::string data = dir_.path() + "/train.jsonl";
  {
    std::ofstream out(data);
    for (int a = 0; a < 10; ++a) {
      for (int b = 0; b < 10; ++b) {
        out << nlohmann::json{{"question", "What is " + std::to_string(a) + " + " + std::to_string(b) + "?"},
                              {"answer", "#### " + std::to_string(a + b)}}
                   .dump()
            << "\n";
      }
    }
  }
  const std::string job = WriteJob(data, 6);
  std::string err;
  // Two steps saved, then a simulated GPU out-of-memory stops the worker at step 3.
  ASSERT_EQ(RunWorker(job, "HEADROOM_SIMULATE_GPU_OOM_AT_STEP=3", &err), 77) << err;
  auto saved = CheckpointReader::OpenLatest(dir_.path() + "/ckpt");
  ASSERT_TRUE(saved);
  ASSERT_EQ(saved->step(), 2);
  const nlohmann::json& dataset = saved->manifest().extra["dataset"];
  EXPECT_EQ(dataset["path"], data);
  EXPECT_EQ(dataset["epoch"], 0);
  EXPECT_EQ(dataset["cursor"], TaskOf([&] {
                                 spec::TrainingJobSpec s = ExampleSpec();
                                 s.task.dataset.path = data;
                                 s.task.seed = 3;
                                 s.grpo.max_prompt_length = 64;
                                 return s;
                               }())
                                   ->DatasetAt(8)
                                   ->cursor);

  // One answer changed: same file name, same size, other contents.
  std::string text = ReadAll(data);
  const size_t at = text.find("#### 0");
  ASSERT_NE(at, std::string::npos);
  text[at + 5] = '1';
  std::ofstream(data, std::ios::trunc) << text;
  EXPECT_EQ(RunWorker(job, "", &err), 2) << err;
  EXPECT_NE(err.find(data), std::string::npos) << err;
  EXPECT_NE(err.find("dataset changed"), std::string::npos) << err;
}

TEST_F(TextTaskWorkerTest, BadDatasetLineExitsWith2NamingFileAndLine) {
  const std::string data = dir_.path() + "/train.jsonl";
  std::ofstream(data) << "{\"question\": \"What is 1 + 1?\", \"answer\": \"#### 2\"}\n{\"prompt\": \"x\"}\n";
  std::string err;
  EXPECT_EQ(RunWorker(WriteJob(data, 2), "", &err), 2) << err;
  EXPECT_NE(err.find(data + ":2"), std::string::npos) << err;
}

TEST_F(TextTaskWorkerTest, PromptsOfDifferentTokenCountsTrainLeftPadded) {
  const std::string data = dir_.path() + "/mixed.jsonl";
  std::ofstream(data) << "{\"question\": \"What is 1 + 1?\", \"answer\": \"#### 2\"}\n"
                      << "{\"question\": \"Tom has 3 apples and gets 4 more. How many apples does he have now?\", "
                         "\"answer\": \"#### 7\"}\n";
  std::string err;
  ASSERT_EQ(RunWorker(WriteJob(data, 2), "", &err), 0) << err;
  const std::vector<protocol::StepRecord> records = protocol::ParseStepLog(ReadAll(dir_.path() + "/log.jsonl"), "log");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records.back().step, 2);
  // Every step's prompts are the 2 records, one of each length: padded to the longer.
  EXPECT_EQ(records[0].tokens, records[1].tokens);
}

TEST_F(TextTaskWorkerTest, HeldOutIsScoredWhenACheckpointIsDue) {
  const std::string held = kSource + "/configs/data/addition-text/heldout.jsonl";
  const int64_t problems = JsonlDataset::Load(held, "question", "answer").size();
  std::string err;
  ASSERT_EQ(RunWorker(WriteJob(kTrain, 2, held), "", &err), 0) << err;
  const std::vector<protocol::StepRecord> records = protocol::ParseStepLog(ReadAll(dir_.path() + "/log.jsonl"), "log");
  ASSERT_EQ(records.size(), 2u);
  for (const auto& r : records) {  // everySteps: 1
    EXPECT_EQ(r.heldout_problems, problems) << "step " << r.step;
    EXPECT_GE(r.heldout_reward, 0.0) << "step " << r.step;
    EXPECT_LE(r.heldout_reward, 1.0) << "step " << r.step;
  }
  EXPECT_NE(err.find("held-out reward"), std::string::npos) << err;
}

}  // namespace
}  // namespace headroom::worker
