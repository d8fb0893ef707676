// What worker and supervisor agree on (core/protocol/): the step record's JSON both ways
// and what the guard reads from it, the model-fetch line beside it in the step log, the GPU out-of-memory report, the reason line picked
// from a crashed worker's output, exit reasons, and where the termination message goes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/guard/step_record_memory.h"
#include "core/protocol/environment.h"
#include "core/protocol/exit_codes.h"
#include "core/protocol/model_fetch_record.h"
#include "core/protocol/step_record.h"
#include "core/protocol/termination_message.h"

namespace headroom::protocol {
namespace {

StepRecord FilledRecord() {
  StepRecord r;
  r.step = 12;
  r.reward_mean = 0.5;
  r.exact_fraction = 0.25;
  r.loss = -0.125;
  r.kl = 0.01;
  r.clip_fraction = 0.0625;
  r.grad_norm = 1.5;
  r.host_bytes = 800 << 20;
  r.host_peak_bytes = 900 << 20;
  r.host_limit_bytes = 1LL << 30;
  r.gpu_allocated_bytes = 3LL << 30;
  r.gpu_reserved_bytes = 4LL << 30;
  r.gpu_peak_bytes = 5LL << 30;
  r.gpu_total_bytes = 80LL << 30;
  r.gpu_alloc_retries = 2;
  r.tokens = 1280;
  r.next_step_tokens = 1290;
  r.generated_tokens = 300;
  r.step_seconds = 0.75;
  r.tokens_per_second = 1706.5;
  r.rollout_seconds = 0.25;
  r.update_seconds = 0.5;
  r.world_size = 4;
  r.rank = 3;
  r.micro_batch_size = 64;
  r.guard_action = "restart";
  r.host_forecast_steps = 3;
  r.host_threshold_steps = 2;
  r.host_growth_bytes_per_step = 48.0 * (1 << 20);
  r.gpu_forecast_steps = 7;
  r.gpu_threshold_steps = 5;
  r.gpu_growth_bytes_per_step = 1024;
  r.checkpoint_bytes = 123456;
  r.checkpoint_seconds = 0.125;
  r.epoch = 2;
  r.cursor = 37;
  r.prompts_filtered = 5;
  r.heldout_reward = 0.375;
  r.heldout_problems = 200;
  r.heldout_accuracy = 0.25;
  r.heldout_accuracy_before = 0.125;
  r.heldout_problems_before = 200;
  r.heldout_answers = {{"What is 2 + 2?", "4", true}, {"Add 1 and \"3\".", "13\n", false}};
  r.heldout_answers_before = {{"What is 2 + 2?", "22", false}};
  return r;
}

TEST(StepRecord, JsonRoundTripKeepsEveryField) {
  const StepRecord r = FilledRecord();
  std::string why;
  const std::optional<StepRecord> back = ParseStepLogLine(r.ToJson(), &why);
  ASSERT_TRUE(back) << why;
  // Field by field through the JSON again: every key written is read back to the same value.
  EXPECT_EQ(nlohmann::json::parse(back->ToJson()), nlohmann::json::parse(r.ToJson()));
  EXPECT_EQ(back->rank, 3);
  EXPECT_EQ(back->guard_action, "restart");
  EXPECT_EQ(back->host_threshold_steps, 2);
  EXPECT_EQ(back->gpu_growth_bytes_per_step, 1024);
  EXPECT_EQ(back->checkpoint_bytes, 123456);
  EXPECT_EQ(back->epoch, 2);
  EXPECT_EQ(back->cursor, 37);
  EXPECT_EQ(back->prompts_filtered, 5);
  EXPECT_EQ(back->heldout_reward, 0.375);
  EXPECT_EQ(back->heldout_problems, 200);
  EXPECT_EQ(back->heldout_accuracy, 0.25);
  EXPECT_EQ(back->heldout_accuracy_before, 0.125);
  EXPECT_EQ(back->heldout_problems_before, 200);
  EXPECT_EQ(back->heldout_answers, r.heldout_answers);
  EXPECT_EQ(back->heldout_answers_before, r.heldout_answers_before);
}

TEST(StepRecord, HeldOutAnswersAreAnyTextAndSkipWhatTheyCannotRead) {
  StepRecord r;
  r.step = 1;
  r.heldout_answers = {{"q", std::string("\xff\xfe 7"), false}};  // a model may decode to invalid UTF-8
  std::string why;
  const std::optional<StepRecord> back = ParseStepLogLine(r.ToJson(), &why);
  ASSERT_TRUE(back) << why;
  ASSERT_EQ(back->heldout_answers.size(), 1u);
  EXPECT_NE(back->heldout_answers[0].response.find(" 7"), std::string::npos);
  // Entries of the wrong shape are skipped, fields of the wrong type keep their defaults.
  const auto odd = ParseStepLogLine(R"({"step":2,"heldout_answers":[7,{"question":"q","correct":"yes"}],)"
                                    R"("heldout_answers_before":"none"})");
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->heldout_answers, (std::vector<HeldOutAnswer>{{"q", "", false}}));
  EXPECT_TRUE(odd->heldout_answers_before.empty());
}

TEST(StepRecord, WritesDesignKeysFirstAndLeavesOutTheGeneration) {
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(FilledRecord().ToJson());
  const char* design[] = {"step",
                          "reward_mean",
                          "loss",
                          "kl",
                          "host_bytes",
                          "host_peak_bytes",
                          "host_limit_bytes",
                          "gpu_allocated_bytes",
                          "gpu_reserved_bytes",
                          "gpu_peak_bytes",
                          "gpu_total_bytes",
                          "tokens",
                          "step_seconds",
                          "tokens_per_second"};
  auto it = j.begin();
  for (const char* key : design) {
    ASSERT_NE(it, j.end());
    EXPECT_EQ(it.key(), key);
    ++it;
  }
  EXPECT_FALSE(j.contains("generation"));
}

TEST(StepRecord, ReadsOldAndPartialLinesAndRefusesWhatIsNoRecord) {
  std::string why;
  // A line from before the forecast keys: what is absent keeps its default.
  auto r = ParseStepLogLine(R"({"step":3,"host_bytes":100,"unknown_key":[1,2],"guard_action":7})", &why);
  ASSERT_TRUE(r) << why;
  EXPECT_EQ(r->step, 3);
  EXPECT_EQ(r->host_bytes, 100);
  EXPECT_EQ(r->host_forecast_steps, -1);
  EXPECT_EQ(r->guard_action, "none") << "a value of the wrong type is ignored";
  EXPECT_FALSE(ParseStepLogLine("[2026-11-24 20:00:00] [info] started", &why));
  EXPECT_EQ(why, "not JSON");
  EXPECT_FALSE(ParseStepLogLine("[1,2]", &why));
  EXPECT_EQ(why, "not a JSON object");
  EXPECT_FALSE(ParseStepLogLine(R"({"host_bytes":1})", &why));
  EXPECT_EQ(why, "no integer \"step\"");
  EXPECT_FALSE(ParseStepLogLine(R"({"step":3,"host_b)"));
}

TEST(ModelFetchRecord, RoundTripsAndIsToldApartFromAStepRecord) {
  ModelFetchRecord f;
  f.repo = "Qwen/Qwen2.5-0.5B-Instruct";
  f.revision = "main";
  f.file = "model.safetensors";
  f.done_bytes = 1 << 20;
  f.total_bytes = 988097824;
  f.rank = 3;
  const std::string line = f.ToJson();
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.find("rank"), std::string::npos) << "the rank is the supervisor's, not the record's";
  const std::optional<ModelFetchRecord> back = ParseModelFetchLine(line);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->repo, f.repo);
  EXPECT_EQ(back->revision, f.revision);
  EXPECT_EQ(back->file, f.file);
  EXPECT_EQ(back->done_bytes, f.done_bytes);
  EXPECT_EQ(back->total_bytes, f.total_bytes);
  EXPECT_FALSE(back->complete());
  f.done_bytes = f.total_bytes;
  EXPECT_TRUE(f.complete());
  EXPECT_FALSE(ParseStepLogLine(line)) << "a model-fetch line is no step";
  EXPECT_FALSE(ParseModelFetchLine(FilledRecord().ToJson())) << "a step is no model-fetch line";
  EXPECT_FALSE(ParseModelFetchLine(R"({"model_fetch":"half)"));
  EXPECT_FALSE(ParseModelFetchLine(R"({"model_fetch":3})"));
}

TEST(ModelFetchRecord, AStepLogWithAModelDownloadStillReadsAsItsSteps) {
  ModelFetchRecord f;
  f.repo = "org/name";
  f.done_bytes = 10;
  f.total_bytes = 20;
  const std::string log = f.ToJson() + "\n" + FilledRecord().ToJson() + "\n";
  const std::vector<StepRecord> steps = ParseStepLog(log, "rank-0.log");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].step, 12);
  EXPECT_THROW(ParseStepLog("{\"model\":1}\n", "rank-0.log"), std::runtime_error) << "other lines are still refused";
}

TEST(StepRecord, GuardReadsReservedGpuBytesAgainstTheDeviceTotal) {
  const StepRecord r = FilledRecord();
  const guard::StepMemory m = guard::StepMemoryOf(r);
  EXPECT_EQ(m.step, 12);
  EXPECT_EQ(m.host_bytes, r.host_bytes);
  EXPECT_EQ(m.host_peak_bytes, r.host_peak_bytes);
  EXPECT_EQ(m.host_limit_bytes, r.host_limit_bytes);
  EXPECT_EQ(m.gpu_bytes, r.gpu_reserved_bytes);
  EXPECT_EQ(m.gpu_peak_bytes, r.gpu_peak_bytes);
  EXPECT_EQ(m.gpu_limit_bytes, r.gpu_total_bytes);
  EXPECT_EQ(m.tokens, r.tokens) << "a record without micro_batch_tokens: the step's tokens";
}

// The guard reads a step's tokens as its largest micro-batch's, what its activation peak
// follows; the record carries them through its JSON.
TEST(StepRecord, GuardReadsTheLargestMicroBatchsTokensWhenTheRecordHasThem) {
  StepRecord r = FilledRecord();
  r.micro_batch_tokens = 640;
  const auto back = ParseStepLogLine(r.ToJson());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->micro_batch_tokens, 640);
  EXPECT_EQ(guard::StepMemoryOf(*back).tokens, 640);
}

TEST(StepRecord, TakesTheForecastItLogs) {
  guard::Forecast f;
  f.host.steps_to_limit = 4;
  f.host.steps_to_threshold = 2;
  f.host.growth_bytes_per_step = 10;
  f.gpu.steps_to_limit = guard::kNever;
  f.gpu.steps_to_threshold = 9;
  f.gpu.growth_bytes_per_step = 20;
  StepRecord r;
  guard::SetForecastFields(f, r);
  EXPECT_EQ(r.host_forecast_steps, 4);
  EXPECT_EQ(r.host_threshold_steps, 2);
  EXPECT_EQ(r.host_growth_bytes_per_step, 10);
  EXPECT_EQ(r.gpu_forecast_steps, -1);
  EXPECT_EQ(r.gpu_threshold_steps, 9);
  EXPECT_EQ(r.gpu_growth_bytes_per_step, 20);
}

TEST(GpuOomReport, RoundTripsAndIsToldApartFromOtherMessages) {
  GpuOomReport r;
  r.device = "cuda:1";
  r.step = 7;
  r.allocated_bytes = 70LL << 30;
  r.reserved_bytes = 74LL << 30;
  r.requested_bytes = 2LL << 30;
  r.total_bytes = 80LL << 30;
  r.message = "CUDA out of memory. Tried to allocate 2.00 GiB";
  const std::optional<GpuOomReport> back = GpuOomReport::FromJson(r.ToJson());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->device, "cuda:1");
  EXPECT_EQ(back->step, 7);
  EXPECT_EQ(back->allocated_bytes, r.allocated_bytes);
  EXPECT_EQ(back->reserved_bytes, r.reserved_bytes);
  EXPECT_EQ(back->requested_bytes, r.requested_bytes);
  EXPECT_EQ(back->total_bytes, r.total_bytes);
  EXPECT_EQ(back->message, r.message);
  EXPECT_EQ(nlohmann::json::parse(r.ToJson())["error"], "gpu_oom");
  // A guard decision, plain text, nothing: not a GPU OOM report.
  EXPECT_FALSE(GpuOomReport::FromJson(R"({"action":"restart","step":7})"));
  EXPECT_FALSE(GpuOomReport::FromJson("crashed on demand at step 3"));
  EXPECT_FALSE(GpuOomReport::FromJson(""));
}

TEST(GpuOomReport, DescribesTheAllocatorsNumbers) {
  GpuOomReport r;
  r.device = "cuda:0";
  r.step = 7;
  r.allocated_bytes = 70LL << 30;
  r.reserved_bytes = 74LL << 30;
  r.requested_bytes = 2LL << 30;
  r.total_bytes = 80LL << 30;
  const std::string text = r.Describe();
  EXPECT_NE(text.find("CUDA out of memory on cuda:0 in step 7"), std::string::npos) << text;
  EXPECT_NE(text.find("2 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("70 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("74 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("80 GiB"), std::string::npos) << text;
  r.requested_bytes = 0;
  EXPECT_EQ(r.Describe().find("tried to allocate"), std::string::npos) << r.Describe();
}

TEST(GpuOomReport, RequestedBytesFromBothAllocatorMessageStyles) {
  // LibTorch 2.x
  EXPECT_EQ(RequestedBytesFromOomMessage("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                                         "capacity of 79.19 GiB of which 1.06 GiB is free."),
            2LL << 30);
  // LibTorch 1.x
  EXPECT_EQ(RequestedBytesFromOomMessage("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total "
                                         "capacity; 14.50 GiB already allocated)"),
            20LL << 20);
  EXPECT_EQ(RequestedBytesFromOomMessage("Tried to allocate 512 B"), 512);
  EXPECT_EQ(RequestedBytesFromOomMessage("CUDA error: out of memory"), 0);
}

TEST(CrashReasonLine, IsTheWorkersErrorNotAFrameOrAWarning) {
  const std::string output =
      "[2026-11-24 20:00:00.000] [headroom-worker] [info] job reverse-tiny: ...\n"
      "[W1124 20:00:01.123456789 Context.cpp:302] Warning: at::autocast::is_enabled() is deprecated\n"
      "[2026-11-24 20:00:02.000] [headroom-worker] [error] CUDA out of memory. Tried to allocate 2.00 GiB\n"
      "Exception raised from malloc at /pytorch/c10/cuda/CUDACachingAllocator.cpp:1234 (most recent call first):\n"
      "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f in libc10.so)\n"
      "frame #26: <unknown function> + 0xc21d5 (0x7f in libtorch_cpu.so)\n"
      "\n"
      "[W1124 20:00:02.5 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed\n";
  EXPECT_EQ(CrashReasonLine(output), "CUDA out of memory. Tried to allocate 2.00 GiB");
}

TEST(CrashReasonLine, WithoutAnErrorTagTheLastLineThatIsNotNoise) {
  EXPECT_EQ(CrashReasonLine("Segmentation fault in foo\nframe #3: bar + 0x1\n[W something.cpp:3] Warning: x\n"),
            "Segmentation fault in foo");
  EXPECT_EQ(CrashReasonLine("fake-worker: crashing on demand at step 3\n"),
            "fake-worker: crashing on demand at step 3");
  EXPECT_EQ(CrashReasonLine("frame #1: x\n\n"), "");
  EXPECT_EQ(CrashReasonLine(""), "");
  // A line that merely starts with '[W' of a word is kept.
  EXPECT_EQ(CrashReasonLine("[Worker] lost its peer\n"), "[Worker] lost its peer");
}

TEST(CrashReasonLine, IsNeverAProgressLineWhenAReasonIsThere) {
  const std::string info = "[2026-11-24 20:00:00.000] [headroom-worker] [info] ";
  const std::string warning = "[2026-11-24 20:00:00.000] [headroom-worker] [warning] ";
  // A refusal on stderr, then progress that was still buffered when the worker exited.
  EXPECT_EQ(CrashReasonLine("/data/train.jsonl:3: expected a JSON object\n" + info + "step 0 of 5\n"),
            "/data/train.jsonl:3: expected a JSON object");
  // A warning is a likelier cause than the progress that followed it.
  EXPECT_EQ(CrashReasonLine(info + "loading\n" + warning + "ignoring tensor x.inv_freq\n" + info + "loaded\n"),
            "ignoring tensor x.inv_freq");
  // An error still wins over a later refusal-looking line or warning.
  EXPECT_EQ(CrashReasonLine("[2026-11-24] [w] [error] disk full\nplain\n" + warning + "w\n"), "disk full");
  // A step record is progress too.
  EXPECT_EQ(CrashReasonLine("Killed by rank 1\n{\"step\":3,\"loss\":0.5}\n"), "Killed by rank 1");
  // Only progress: no reason at all, rather than a line that names none.
  EXPECT_EQ(CrashReasonLine(info + "checkpoint step 3: 100 bytes\n{\"step\":3}\n"), "");
}

TEST(LoadedPhaseMessage, RoundTripsAndIsNoOtherExitsMessage) {
  EXPECT_EQ(LoadedPhaseNextStep(LoadedPhaseMessage(1)), 1);
  EXPECT_EQ(LoadedPhaseNextStep(LoadedPhaseMessage(42)), 42);
  EXPECT_EQ(LoadedPhaseNextStep(""), std::nullopt);
  EXPECT_EQ(LoadedPhaseNextStep("dataset.jsonl:3: invalid JSON"), std::nullopt);
  EXPECT_EQ(LoadedPhaseNextStep(R"({"error":"gpu_oom","step":3})"), std::nullopt);
  EXPECT_EQ(LoadedPhaseNextStep(R"({"phase":1,"next_step":3})"), std::nullopt);
  EXPECT_EQ(LoadedPhaseNextStep(R"({"phase":"loaded","next_step":"3"})"), std::nullopt);
}

TEST(ExitCodes, ReasonsNameEveryWorkerCode) {
  EXPECT_EQ(ExitReason(kExitFinished, false), "Completed");
  EXPECT_EQ(ExitReason(kExitFailure, false), "Error");
  EXPECT_EQ(ExitReason(kExitInvalidSpec, false), "InvalidSpec");
  EXPECT_EQ(ExitReason(kExitDrained, false), "Drained");
  EXPECT_EQ(ExitReason(kExitGuardStop, false), "GuardStop");
  EXPECT_EQ(ExitReason(kExitGpuOom, false), "GpuOOM");
  EXPECT_EQ(ExitReason(kExitKilled, true), "OOMKilled");
  EXPECT_EQ(ExitReason(kExitKilled, false), "Signal 9");
  EXPECT_EQ(ExitReason(3, false), "Exit 3");
  // docs/design.md's numbers.
  EXPECT_EQ(kExitDrained, 75);
  EXPECT_EQ(kExitGuardStop, 76);
  EXPECT_EQ(kExitGpuOom, 77);
}

TEST(TerminationMessage, GoesToTheFileTheEnvironmentNames) {
  if (std::filesystem::exists(kTerminationLogPath)) GTEST_SKIP() << "running where /dev/termination-log exists";
  const auto path = std::filesystem::temp_directory_path() / ("headroom-termination-" + std::to_string(::getpid()));
  ::setenv(kTerminationLogEnv, path.c_str(), 1);
  EXPECT_EQ(WriteTerminationMessage("first"), path.string());
  EXPECT_EQ(WriteTerminationMessage(R"({"error":"gpu_oom"})"), path.string());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "{\"error\":\"gpu_oom\"}\n") << "each message replaces the last";
  ::setenv(kTerminationLogEnv, "/nonexistent-dir/termination", 1);
  EXPECT_EQ(WriteTerminationMessage("x"), "");
  ::unsetenv(kTerminationLogEnv);
  EXPECT_EQ(WriteTerminationMessage("x"), "");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace headroom::protocol
