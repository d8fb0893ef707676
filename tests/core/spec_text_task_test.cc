// spec.task's text-task fields (dataset, prompt, reward): parsed with lines, strict about
// unknown fields and types, round-tripped, hashed into the run definition, validated
// (the dataset file where it can be read here), and the prompt template's rules.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/spec/prompt_template.h"
#include "core/spec/training_job.h"
#include "tests/core/spec_test_util.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::spec {
namespace {

using testing_util::AllErrors;
using testing_util::ErrorPaths;
using Paths = std::set<std::string>;

// docs/design.md's example, as a whole job. The model and dataset paths do not exist here:
// on a cluster they live on volumes only the pods mount, so validate leaves them be.
const std::string kTextJob = R"(apiVersion: headroom.dev/v1alpha1
kind: TrainingJob
metadata:
  name: gsm8k-qwen
spec:
  model: {path: /models/Qwen2.5-0.5B-Instruct}
  grpo: {steps: 10, promptsPerStep: 8, groupSize: 4, maxPromptLength: 256, maxResponseLength: 512}
  task:
    seed: 7
    dataset: {path: /data/gsm8k/train.jsonl, promptKey: question, answerKey: answer, heldOut: ""}
    prompt: {format: chatml, system: "Please reason step by step."}
    reward: {name: gsm8k, formatWeight: 0.0}
)";

std::string TextJobWith(const std::string& from, const std::string& to) {
  std::string text = kTextJob;
  const size_t at = text.find(from);
  if (at == std::string::npos) return "<<" + from + " not found>>";
  return text.replace(at, from.size(), to);
}

TEST(SpecTextTask, DesignExampleParses) {
  ParseResult r = ParseTrainingJob(kTextJob);
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const TaskSpec& t = r.job->spec.task;
  EXPECT_TRUE(t.is_text());
  EXPECT_EQ(t.dataset.path, "/data/gsm8k/train.jsonl");
  EXPECT_EQ(t.dataset.prompt_key, "question");
  EXPECT_EQ(t.dataset.answer_key, "answer");
  EXPECT_EQ(t.dataset.held_out, "");
  EXPECT_EQ(t.prompt.format, "chatml");
  EXPECT_EQ(t.prompt.system, "Please reason step by step.");
  EXPECT_EQ(t.reward.name, "gsm8k");
  EXPECT_EQ(t.reward.format_weight, 0.0);
  EXPECT_EQ(t.seed, 7u);
}

TEST(SpecTextTask, DefaultsWhenOnlyTheDatasetPathIsGiven) {
  ParseResult r = ParseTrainingJob(TextJobWith(
      R"(    dataset: {path: /data/gsm8k/train.jsonl, promptKey: question, answerKey: answer, heldOut: ""}
    prompt: {format: chatml, system: "Please reason step by step."}
    reward: {name: gsm8k, formatWeight: 0.0}
)",
      "    dataset: {path: /data/x.jsonl}\n"));
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  const TaskSpec& t = r.job->spec.task;
  EXPECT_EQ(t.dataset.prompt_key, "question");
  EXPECT_EQ(t.dataset.answer_key, "answer");
  EXPECT_EQ(t.prompt.format, "chatml");
  EXPECT_EQ(t.prompt.system, "");
  EXPECT_EQ(t.prompt.template_text, "");
  EXPECT_EQ(t.reward.name, "gsm8k");
  EXPECT_EQ(t.reward.format_weight, 0.0);

  // A job without a dataset is a generated task, as before.
  ParseResult plain = ParseTrainingJob(testing_util::kGoodJob);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain.job->spec.task.is_text());
}

TEST(SpecTextTask, ErrorsNameTheFieldAndItsLine) {
  ParseResult r = ParseTrainingJob(TextJobWith("format: chatml", "format: chatlm"));
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.task.prompt.format"})) << AllErrors(r);
  EXPECT_EQ(r.errors[0].line, 11);
  EXPECT_EQ(r.errors[0].message,
            "unknown value \"chatlm\" (did you mean chatml?); expected one of chatml, llama3, template");

  r = ParseTrainingJob(TextJobWith("promptKey: question", "promptkey: question"));
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.task.dataset.promptkey"})) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, "unknown field (did you mean promptKey?)");
  EXPECT_EQ(r.errors[0].line, 10);

  r = ParseTrainingJob(TextJobWith("    reward:", "    rewards:"));
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.task.rewards"})) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, "unknown field (did you mean reward?)");

  r = ParseTrainingJob(TextJobWith("{name: gsm8k,", "{name: gsm8,"));
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.task.reward.name"})) << AllErrors(r);
  EXPECT_EQ(r.errors[0].line, 12);
  EXPECT_NE(r.errors[0].message.find("did you mean gsm8k?"), std::string::npos) << r.errors[0].message;

  r = ParseTrainingJob(TextJobWith("formatWeight: 0.0", "formatWeight: high"));
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.task.reward.formatWeight"})) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, "expected number, got string \"high\"");

  r = ParseTrainingJob(TextJobWith("formatWeight: 0.0", "formatWeight: 1.5"));
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.task.reward.formatWeight"})) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, "must be in [0, 1], got 1.5");
  EXPECT_EQ(r.errors[0].line, 12);
  EXPECT_TRUE(ParseTrainingJob(TextJobWith("formatWeight: 0.0", "formatWeight: 1")).ok());

  r = ParseTrainingJob(TextJobWith("promptKey: question", "promptKey: 5"));
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.task.dataset.promptKey"})) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, "expected string, got integer 5 (quote it: \"5\")");

  r = ParseTrainingJob(TextJobWith("answerKey: answer", "answerKey: \"\""));
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.task.dataset.answerKey"})) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, "must not be empty");
}

TEST(SpecTextTask, NeedsAModelPathForItsTokenizer) {
  ParseResult r = ParseTrainingJob(TextJobWith("  model: {path: /models/Qwen2.5-0.5B-Instruct}\n", ""));
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.task.dataset.path"})) << AllErrors(r);
  const SpecError& e = r.errors[0];
  EXPECT_EQ(e.line, 9);
  EXPECT_NE(e.message.find("requires spec.model.path or spec.model.hub"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("tokenizer"), std::string::npos) << e.message;
}

TEST(SpecTextTask, NameAndDigitsDoNotLimitPromptLengths) {
  // A generated addition task with 3 digits needs maxPromptLength >= 9; a text task does
  // not read name/digits, so the same lengths pass.
  ParseResult r = ParseTrainingJob(
      TextJobWith("maxPromptLength: 256, maxResponseLength: 512", "maxPromptLength: 2, maxResponseLength: 1"));
  EXPECT_TRUE(r.ok()) << AllErrors(r);
  // ...but a typo in them is still an error, as the CRD schema reports it.
  r = ParseTrainingJob(TextJobWith("    seed: 7\n", "    seed: 7\n    name: multiply\n"));
  EXPECT_EQ(ErrorPaths(r), (Paths{"spec.task.name"})) << AllErrors(r);
}

TEST(SpecTextTask, HeldOutNeedsADataset) {
  ParseResult r = ParseTrainingJob(testing_util::GoodJobWith(
      "task: {name: addition, digits: 3, seed: 1}", "task: {name: addition, dataset: {heldOut: /data/test.jsonl}}"));
  EXPECT_EQ(ErrorPaths(r), (Paths{"spec.task.dataset.heldOut"})) << AllErrors(r);
}

TEST(SpecTextTask, TemplateRules) {
  auto with_prompt = [](const std::string& prompt_line) {
    return ParseTrainingJob(
        TextJobWith("    prompt: {format: chatml, system: \"Please reason step by step.\"}", prompt_line));
  };
  ParseResult r =
      with_prompt("    prompt: {format: template, template: \"{system}\\nQ: {prompt}\\nA: \\\\boxed{{}}\"}");
  ASSERT_TRUE(r.ok()) << AllErrors(r);
  EXPECT_EQ(r.job->spec.task.prompt.template_text, "{system}\nQ: {prompt}\nA: \\boxed{{}}");

  r = with_prompt("    prompt: {format: template}");
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.task.prompt.template"})) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, "required when format is template");

  r = with_prompt("    prompt: {format: template, template: \"Q: {question}\"}");
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.task.prompt.template"})) << AllErrors(r);
  EXPECT_EQ(r.errors[0].line, 11);
  EXPECT_EQ(r.errors[0].message,
            "unknown placeholder {question} at character 4; expected {system} or {prompt} (write {{ and }} for "
            "literal braces)");

  r = with_prompt("    prompt: {format: llama3, template: \"Q: {prompt}\"}");
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.task.prompt.template"})) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, "only used when format is template; format is llama3");
}

TEST(PromptTemplate, CheckAndExpand) {
  EXPECT_EQ(CheckPromptTemplate("{prompt}"), "");
  EXPECT_EQ(CheckPromptTemplate("{system}: {prompt} {prompt}"), "");
  EXPECT_EQ(CheckPromptTemplate("just text"), "must contain {prompt} (where the problem goes)");
  EXPECT_EQ(CheckPromptTemplate("{system}"), "must contain {prompt} (where the problem goes)");
  EXPECT_EQ(CheckPromptTemplate("{prompt} {"), "unclosed \"{\" at character 10 (write {{ for a literal brace)");
  EXPECT_EQ(CheckPromptTemplate("{prompt} }"), "single \"}\" at character 10 (write }} for a literal brace)");
  EXPECT_EQ(CheckPromptTemplate("{Prompt}"), "unknown placeholder {Prompt} at character 1; expected {system} or "
                                             "{prompt} (write {{ and }} for literal braces)");
  EXPECT_NE(CheckPromptTemplate("{}{prompt}"), "");
  // "{{prompt}}" is the literal text "{prompt}", as in Python's str.format.
  EXPECT_EQ(CheckPromptTemplate("{{prompt}}"), "must contain {prompt} (where the problem goes)");

  EXPECT_EQ(ExpandPromptTemplate("[{system}] {prompt} = \\boxed{{?}} {{{prompt}}}", "S {prompt}", "1+1"),
            "[S {prompt}] 1+1 = \\boxed{?} {1+1}");
  EXPECT_EQ(ExpandPromptTemplate("{prompt}", "", ""), "");
  EXPECT_THROW(ExpandPromptTemplate("{x}", "", "p"), std::invalid_argument);
}

TEST(SpecTextTask, RoundTripsThroughYamlAndJson) {
  const std::string tricky = TextJobWith(
      "    prompt: {format: chatml, system: \"Please reason step by step.\"}",
      "    prompt:\n      format: template\n      system: \"line one\\nline \\\"two\\\": {not a placeholder} 42\"\n"
      "      template: \"<s>{system}\\n\\n{prompt}\\n\\\\boxed{{}} #\"");
  for (const std::string& text : {kTextJob, tricky}) {
    ParseResult r = ParseTrainingJob(text);
    ASSERT_TRUE(r.ok()) << AllErrors(r);
    TrainingJob job = *r.job;
    job.spec.task.dataset.held_out = "/data/gsm8k/test.jsonl";
    job.spec.task.dataset.prompt_key = "true";  // a string that reads as a boolean unquoted
    job.spec.task.reward.format_weight = 0.125;
    ParseResult again = ParseTrainingJob(ToYaml(job));
    ASSERT_TRUE(again.ok()) << AllErrors(again) << ToYaml(job);
    EXPECT_EQ(*again.job, job) << ToYaml(job);
    ParseResult from_json = ParseTrainingJobJson(ToJsonValue(job));
    ASSERT_TRUE(from_json.ok()) << AllErrors(from_json);
    EXPECT_EQ(*from_json.job, job);
    const nlohmann::json task = ToJsonValue(job)["spec"]["task"];
    EXPECT_EQ(task["dataset"]["heldOut"], "/data/gsm8k/test.jsonl");
    EXPECT_EQ(task["dataset"]["promptKey"], "true");
    EXPECT_EQ(task["reward"]["formatWeight"], 0.125);
    EXPECT_TRUE(task["prompt"].contains("template"));
  }
}

TEST(SpecTextTask, RunDefinitionHashCoversWhatTheTaskReads) {
  const TrainingJobSpec text = ParseTrainingJob(kTextJob).job->spec;
  const std::string text_hash = RunDefinitionHash(text);
  std::vector<void (*)(TrainingJobSpec&)> text_changes = {
      [](TrainingJobSpec& s) { s.task.dataset.path = "/data/gsm8k/other.jsonl"; },
      [](TrainingJobSpec& s) { s.task.dataset.prompt_key = "problem"; },
      [](TrainingJobSpec& s) { s.task.dataset.answer_key = "solution"; },
      [](TrainingJobSpec& s) { s.task.dataset.held_out = "/data/gsm8k/test.jsonl"; },
      [](TrainingJobSpec& s) { s.task.prompt.format = "llama3"; },
      [](TrainingJobSpec& s) { s.task.prompt.system = "Think."; },
      [](TrainingJobSpec& s) {
    s.task.prompt.format = "template";
    s.task.prompt.template_text = "{prompt}";
      },
      [](TrainingJobSpec& s) { s.task.reward.name = "math"; },
      [](TrainingJobSpec& s) { s.task.reward.format_weight = 0.1; },
      [](TrainingJobSpec& s) { s.task.seed = 8; },
  };
  std::set<std::string> seen = {text_hash};
  for (size_t i = 0; i < text_changes.size(); ++i) {
    TrainingJobSpec changed = text;
    text_changes[i](changed);
    EXPECT_TRUE(seen.insert(RunDefinitionHash(changed)).second) << "text change " << i;
  }
  // A text task does not read name or digits.
  TrainingJobSpec renamed = text;
  renamed.task.name = "sort";
  renamed.task.digits = 9;
  EXPECT_EQ(RunDefinitionHash(renamed), text_hash);

  // A generated task does not read the text fields: its hash, and so its checkpoints'
  // resumes, are as they were before text tasks existed.
  const TrainingJobSpec generated = ParseTrainingJob(testing_util::kGoodJob).job->spec;
  const std::string generated_hash = RunDefinitionHash(generated);
  TrainingJobSpec with_text_fields = generated;
  with_text_fields.task.prompt.format = "llama3";
  with_text_fields.task.prompt.system = "ignored";
  with_text_fields.task.reward.name = "exact";
  with_text_fields.task.dataset.prompt_key = "q";
  EXPECT_EQ(RunDefinitionHash(with_text_fields), generated_hash);
  // ...and setting a dataset makes it another run.
  TrainingJobSpec made_text = generated;
  made_text.task.dataset.path = "/data/x.jsonl";
  EXPECT_NE(RunDefinitionHash(made_text), generated_hash);
}

// The dataset file, where this machine can read it, as `headroom validate` sees it.
class SpecTextTaskFile : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = (std::filesystem::path(dir_.path()) / name).string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  ParseResult ParseWithDataset(const std::string& path, const std::string& held_out = "") {
    std::string text = TextJobWith("path: /data/gsm8k/train.jsonl", "path: \"" + path + "\"");
    const std::string empty_held_out = "heldOut: \"\"";
    text.replace(text.find(empty_held_out), empty_held_out.size(), "heldOut: \"" + held_out + "\"");
    return ParseTrainingJob(text);
  }
  testing::TempDir dir_{"headroom-spec-text"};
};

TEST_F(SpecTextTaskFile, AReadableDatasetWithTheKeysPasses) {
  const std::string good = Write("train.jsonl", "\n{\"question\": \"1+1?\", \"answer\": \"#### 2\"}\n{\"bad\": 1}\n");
  ParseResult r = ParseWithDataset(good);
  EXPECT_TRUE(r.ok()) << AllErrors(r);  // only the first record is read here; the worker reads the rest
  r = ParseWithDataset(good, good);
  EXPECT_TRUE(r.ok()) << AllErrors(r);
  // A path this machine cannot see is left to the worker (it may be on a pod's volume).
  r = ParseWithDataset(dir_.path() + "/absent.jsonl");
  EXPECT_TRUE(r.ok()) << AllErrors(r);
}

TEST_F(SpecTextTaskFile, AMissingKeyIsNamedWithTheKeysTheRecordHas) {
  const std::string file = Write("math.jsonl", "{\"problem\": \"1+1?\", \"solution\": \"2\"}\n");
  ParseResult r = ParseWithDataset(file);
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.task.dataset.path"})) << AllErrors(r);
  ASSERT_EQ(r.errors.size(), 2u) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, file + ":1: no key \"question\" (promptKey); the record has: problem, solution");
  EXPECT_EQ(r.errors[1].message, file + ":1: no key \"answer\" (answerKey); the record has: problem, solution");
  EXPECT_EQ(r.errors[0].line, 10);
}

TEST_F(SpecTextTaskFile, UnusableFilesAreNamed) {
  const std::string empty = Write("empty.jsonl", "\n  \n");
  ParseResult r = ParseWithDataset(empty);
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, empty + " has no records (empty file)");

  const std::string broken = Write("broken.jsonl", "\n\n{\"question\": \"1+1?\", \"answer\": }\n");
  r = ParseWithDataset(broken);
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, broken + ":3: not valid JSON");

  const std::string list = Write("list.jsonl", "[\"question\", \"answer\"]\n");
  r = ParseWithDataset(list);
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, list + ":1: expected a JSON object per line, got array");

  r = ParseWithDataset(dir_.path());
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, "is a directory, expected a .jsonl file: " + dir_.path());

  // A first line of 1 GiB of NUL bytes (sparse): refused after reading the limit of it.
  const std::string nul = Write("nul.jsonl", "");
  ASSERT_EQ(::truncate(nul.c_str(), off_t{1} << 30), 0);
  r = ParseWithDataset(nul);
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, nul + ":1: the line is longer than 4 MiB (the limit for one line, one record)");

  const std::string fifo = dir_.path() + "/fifo.jsonl";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = ParseWithDataset(fifo);
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_EQ(r.errors[0].message, fifo + ": is a FIFO, expected a .jsonl file");

  const std::string good = Write("train.jsonl", "{\"question\": \"q\", \"answer\": \"a\"}\n");
  r = ParseWithDataset(good, empty);
  ASSERT_EQ(ErrorPaths(r), (Paths{"spec.task.dataset.heldOut"})) << AllErrors(r);
}

}  // namespace
}  // namespace headroom::spec
