// The shared reconciler, driven by scripted observations: every way a generation can end
// and what the job does next. No processes, no pods, no clocks.
#include "operator/runtime/job_reconciler.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/guard/decision.h"
#include "core/guard/guard_history.h"
#include "core/protocol/termination_message.h"
#include "tests/operator/runtime_test_support.h"

namespace headroom::runtime {
namespace {

using Kind = NextStep::Kind;
using std::chrono::milliseconds;
using testing::Exit;
using testing::MakeJob;
using testing::Options;
using testing::Script;

std::string GuardJson(guard::DecisionAction action, int step) {
  guard::Decision d;
  d.action = action;
  d.resource = "host";
  d.reason = "host growing 48 MiB/step";
  d.step = step;
  return d.ToJson();
}

TEST(JobReconciler, LaunchesTheFirstGenerationAtTheSpecSize) {
  JobReconciler rec(MakeJob(2), Options());
  NextStep next = rec.Reconcile(Observation{});
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(next.launch.generation, 1);
  EXPECT_EQ(next.launch.job.spec.workers, 2);
  EXPECT_TRUE(next.launch.job.spec.memory_guard.enabled);
  EXPECT_FALSE(next.launch.guard_history_json.empty());
  EXPECT_EQ(rec.status().phase, JobPhase::kPending);
}

TEST(JobReconciler, StepsMakeItRunningAndAllZeroExitsSucceed) {
  JobReconciler rec(MakeJob(2), Options());
  rec.Reconcile(Observation{});
  Script s{.generation = 1, .ranks = 2};
  EXPECT_EQ(rec.Reconcile(s.Running({1, 2, 3})).kind, Kind::kWait);
  EXPECT_EQ(rec.status().phase, JobPhase::kRunning);
  EXPECT_EQ(rec.status().step, 3);
  ASSERT_TRUE(rec.status().final_reward);
  EXPECT_NEAR(*rec.status().final_reward, 0.3, 1e-9);
  EXPECT_EQ(rec.status().memory.host_bytes, (100 << 20) + 3 * (8 << 20));
  NextStep next = rec.Reconcile(s.Ended({Exit(0), Exit(0)}));
  EXPECT_EQ(next.kind, Kind::kFinished);
  EXPECT_EQ(rec.status().phase, JobPhase::kSucceeded);
  EXPECT_EQ(rec.status().restarts, 0);
  EXPECT_TRUE(rec.status().actions.empty());
}

TEST(JobReconciler, TheStatusCarriesRankZerosLatestHeldOutAccuracy) {
  JobReconciler rec(MakeJob(2), Options());
  rec.Reconcile(Observation{});
  Script s{.generation = 1, .ranks = 2};
  rec.Reconcile(s.Running({1, 2, 3}));
  EXPECT_FALSE(rec.status().heldout_accuracy.has_value()) << "nothing measured";
  Observation o;
  o = s.Running({4, 5});
  o.new_steps[0].heldout_accuracy_before = 0.3;  // a fresh run's first record: step 0's
  o.new_steps[1].heldout_accuracy = 0.9;         // rank 1's share is not the job's
  rec.Reconcile(o);
  ASSERT_TRUE(rec.status().heldout_accuracy);
  EXPECT_EQ(*rec.status().heldout_accuracy, 0.3);
  o = s.Running({6, 7});
  o.new_steps[0].heldout_accuracy = 0.55;
  rec.Reconcile(o);
  EXPECT_EQ(*rec.status().heldout_accuracy, 0.55);
  EXPECT_EQ(ToJson(rec.status())["heldOutAccuracy"], 0.55);
}

TEST(JobReconciler, ModelFetchProgressOfTheRunningGenerationReachesTheStatus) {
  JobReconciler rec(MakeJob(1), Options());
  rec.Reconcile(Observation{});
  Script s{.generation = 1, .ranks = 1};
  Observation o = s.Running();
  o.model_fetch = protocol::ModelFetchRecord{"org/name", "main", "model.safetensors", 300, 1000};
  o.model_fetch->generation = 0;  // a straggler from before this launch
  rec.Reconcile(o);
  EXPECT_FALSE(rec.status().model_fetch);
  o.model_fetch->generation = 1;
  rec.Reconcile(o);
  ASSERT_TRUE(rec.status().model_fetch);
  EXPECT_EQ(rec.status().model_fetch->done_bytes, 300);
  EXPECT_EQ(rec.status().model_fetch->file, "model.safetensors");
  rec.Reconcile(s.Running({1}));
  ASSERT_TRUE(rec.status().model_fetch) << "the fetch stays on record once training runs";
  EXPECT_EQ(rec.status().model_fetch->total_bytes, 1000);
}

TEST(JobReconciler, GuardRestartRelaunchesTheSameSpecWithNoStepLost) {
  JobReconciler rec(MakeJob(), Options());
  rec.Reconcile(Observation{});
  Script s;
  rec.Reconcile(s.Running({1, 2, 3, 4, 5, 6, 7}));
  NextStep next = rec.Reconcile(s.Ended({Exit(76, GuardJson(guard::DecisionAction::kRestart, 7))}, 7));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(next.launch.generation, 2);
  EXPECT_EQ(next.launch.job, MakeJob());
  EXPECT_EQ(rec.status().phase, JobPhase::kRestarting);
  EXPECT_EQ(rec.status().restarts, 1);
  EXPECT_EQ(rec.status().steps_lost, 0);
  ASSERT_EQ(rec.status().actions.size(), 1u);
  EXPECT_EQ(rec.status().actions[0].step, 7);
  EXPECT_EQ(rec.status().actions[0].type, ActionType::kRestart);
  EXPECT_NE(rec.status().actions[0].reason.find("48 MiB/step"), std::string::npos);
  EXPECT_NE(next.launch.guard_history_json.find("\"restarts\":1"), std::string::npos) << next.launch.guard_history_json;
  // The next generation's first step flips it back to Running.
  Script s2{.generation = 2};
  rec.Reconcile(s2.Running({8}));
  EXPECT_EQ(rec.status().phase, JobPhase::kRunning);
  EXPECT_EQ(rec.status().steps_lost, 0);
}

TEST(JobReconciler, GuardReshardGrowsTheWorkerCount) {
  JobReconciler rec(MakeJob(1), Options());
  rec.Reconcile(Observation{});
  Script s;
  guard::Decision d;
  d.action = guard::DecisionAction::kReshard;
  d.reason = "optimizer state does not fit";
  d.step = 3;
  d.target_workers = 2;
  NextStep next = rec.Reconcile(s.Ended({Exit(76, d.ToJson())}, 3));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(next.launch.job.spec.workers, 2);
  EXPECT_EQ(rec.status().reshards, 1);
  EXPECT_EQ(rec.status().restarts, 0);
  EXPECT_EQ(rec.status().phase, JobPhase::kResharding);
  EXPECT_EQ(rec.status().actions.back().type, ActionType::kReshard);
  EXPECT_NE(rec.status().actions.back().reason.find("workers 1 -> 2"), std::string::npos);
}

TEST(JobReconciler, ReshardBeyondMaxWorkersFallsBackToARestart) {
  spec::TrainingJob job = MakeJob(2);
  job.spec.max_workers = 2;
  JobReconciler rec(job, Options());
  rec.Reconcile(Observation{});
  Script s{.generation = 1, .ranks = 2};
  guard::Decision d;
  d.action = guard::DecisionAction::kReshard;
  d.target_workers = 4;
  const std::string json = d.ToJson();
  NextStep next = rec.Reconcile(s.Ended({Exit(76, json), Exit(76, json)}, 0));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(next.launch.job.spec.workers, 2);
  EXPECT_EQ(rec.status().actions.back().type, ActionType::kRestart);
  EXPECT_NE(rec.status().actions.back().reason.find("fits within [1, 2]"), std::string::npos);
}

TEST(JobReconciler, ShrinkMicroBatchAndOffloadToggleChangeOnlyThoseFields) {
  JobReconciler rec(MakeJob(), Options());
  rec.Reconcile(Observation{});
  guard::Decision shrink;
  shrink.action = guard::DecisionAction::kShrinkMicroBatch;
  shrink.target_micro_batch_size = 8;
  NextStep next = rec.Reconcile(Script{}.Ended({Exit(76, shrink.ToJson())}, 0));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(next.launch.job.spec.grpo.micro_batch_size, 8);
  EXPECT_EQ(spec::RunDefinitionHash(next.launch.job.spec), spec::RunDefinitionHash(MakeJob().spec));

  spec::TrainingJob offloaded = MakeJob();
  offloaded.spec.sharding.offload_optimizer = true;
  offloaded.spec.sharding.offload_params = true;
  JobReconciler rec2(offloaded, Options());
  rec2.Reconcile(Observation{});
  next = rec2.Reconcile(Script{}.Ended({Exit(76, GuardJson(guard::DecisionAction::kDisableOffload, 4))}, 4));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_FALSE(next.launch.job.spec.sharding.offload_optimizer);
  EXPECT_FALSE(next.launch.job.spec.sharding.offload_params);
  EXPECT_EQ(rec2.status().actions.back().type, ActionType::kDisableOffload);
}

TEST(JobReconciler, ShrinkTokenBudgetChangesOnlyTheBudgetAndIsRecordedAsSuch) {
  JobReconciler rec(MakeJob(), Options());
  rec.Reconcile(Observation{});
  guard::Decision shrink;
  shrink.action = guard::DecisionAction::kShrinkTokenBudget;
  shrink.reason = "a long prompt next";
  const spec::GrpoSpec& g = MakeJob().spec.grpo;
  const int seq = g.max_prompt_length + g.max_response_length;
  shrink.target_max_tokens_per_micro_batch = seq;
  NextStep next = rec.Reconcile(Script{}.Ended({Exit(76, shrink.ToJson())}, 0));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(next.launch.job.spec.grpo.max_tokens_per_micro_batch, seq);
  spec::TrainingJob expected = MakeJob();
  expected.spec.grpo.max_tokens_per_micro_batch = seq;
  EXPECT_EQ(next.launch.job, expected) << "nothing else changes";
  EXPECT_EQ(spec::RunDefinitionHash(next.launch.job.spec), spec::RunDefinitionHash(MakeJob().spec));
  EXPECT_EQ(rec.status().actions.back().type, ActionType::kShrinkTokenBudget);
  EXPECT_NE(rec.status().actions.back().reason.find("a long prompt next"), std::string::npos);
}

TEST(JobReconciler, OomKillRestartsFromTheCheckpointCountingStepsLost) {
  JobReconciler rec(MakeJob(), Options());
  rec.Reconcile(Observation{});
  Script s;
  rec.Reconcile(s.Running({11, 12, 13, 14}));
  NextStep next = rec.Reconcile(s.Ended({Exit(137, "", /*oom=*/true)}, 10));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(next.launch.job, MakeJob());
  EXPECT_EQ(rec.status().oom_kills, 1);
  EXPECT_EQ(rec.status().steps_lost, 4);
  EXPECT_EQ(rec.status().restarts, 1);
  EXPECT_EQ(rec.status().actions.back().type, ActionType::kRestartAfterOOMKill);
  EXPECT_EQ(rec.status().actions.back().step, 14);
  EXPECT_NE(rec.status().actions.back().reason.find("OOM-killed by the kernel during step 15"), std::string::npos);
  EXPECT_NE(rec.status().actions.back().reason.find("4 step(s) lost"), std::string::npos);
}

TEST(JobReconciler, GpuOutOfMemoryIsAnOomOnTheGpuWithItsReportAndStepsLost) {
  JobReconciler rec(MakeJob(2), Options());
  rec.Reconcile(Observation{});
  Script s{.generation = 1, .ranks = 2};
  rec.Reconcile(s.Running({11, 12, 13}));
  protocol::GpuOomReport oom;
  oom.device = "cuda:1";
  oom.step = 14;
  oom.allocated_bytes = 70LL << 30;
  oom.reserved_bytes = 74LL << 30;
  oom.requested_bytes = 2LL << 30;
  oom.total_bytes = 80LL << 30;
  oom.message = "CUDA out of memory. Tried to allocate 2.00 GiB";
  // Rank 1 ran out; rank 0 was killed by the supervisor after it.
  NextStep next = rec.Reconcile(s.Ended({Exit(137), Exit(77, oom.ToJson())}, 10));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(rec.status().oom_kills, 1);
  EXPECT_EQ(rec.status().gpu_oom_kills, 1);
  EXPECT_EQ(rec.status().steps_lost, 3);
  const ActionRecord& a = rec.status().actions.back();
  EXPECT_EQ(a.type, ActionType::kRestartAfterGpuOOM);
  EXPECT_NE(a.reason.find("rank 1 ran out of GPU memory during step 14"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find(oom.Describe()), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find("3 step(s) lost"), std::string::npos) << a.reason;
  EXPECT_EQ(guard::GuardHistory::FromJson(next.launch.guard_history_json).oom_kills, 1);

  // Without a readable report, the worker's error line is the reason.
  JobReconciler bare(MakeJob(), Options(false));
  bare.Reconcile(Observation{});
  bare.Reconcile(Script{}.Running({1, 2}));
  RankExit e = Exit(77);
  e.last_output = "CUDA out of memory. Tried to allocate 20.00 MiB";
  bare.Reconcile(Script{}.Ended({e}, 0));
  EXPECT_EQ(bare.status().actions.back().type, ActionType::kRestartAfterGpuOOM);
  EXPECT_NE(bare.status().actions.back().reason.find(e.last_output), std::string::npos);
  EXPECT_EQ(bare.status().steps_lost, 2);
}

TEST(JobReconciler, ACrashIsExplainedByTheWorkersErrorLineNotAFrameOrAWarning) {
  JobReconciler rec(MakeJob(), Options(false));
  rec.Reconcile(Observation{});
  rec.Reconcile(Script{}.Running({1, 2}));
  // What Kubernetes puts in the termination message of a worker that wrote none: its
  // log's tail.
  const std::string tail =
      "[2026-11-24 20:00:02.000] [headroom-worker] [error] NCCL error: unhandled system error\n"
      "Exception raised from checkForNCCLErrors at ProcessGroupNCCL.cpp:1234 (most recent call first):\n"
      "frame #26: <unknown function> + 0xc21d5 (0x7f in libtorch_cpu.so)\n"
      "[W1124 20:00:02.5 ProcessGroupNCCL.cpp:1250] Warning: process group has NOT been destroyed\n";
  rec.Reconcile(Script{}.Ended({Exit(1, tail)}, 0));
  const std::string& reason = rec.status().actions.back().reason;
  EXPECT_NE(reason.find(": NCCL error: unhandled system error"), std::string::npos) << reason;
  EXPECT_EQ(reason.find("frame #"), std::string::npos) << reason;
  EXPECT_EQ(reason.find("Warning"), std::string::npos) << reason;
}

TEST(JobReconciler, MemoryStatusIsTheWorstRanksOwnForecast) {
  JobReconciler rec(MakeJob(2), Options());
  rec.Reconcile(Observation{});
  Script s{.generation = 1, .ranks = 2};
  Observation o = s.Running({5});
  // Rank 1 forecasts the limit sooner and grows faster: the status says rank 1's numbers.
  o.new_steps[0].host_forecast_steps = 6;
  o.new_steps[0].host_threshold_steps = 4;
  o.new_steps[0].host_growth_bytes_per_step = 1 << 20;
  o.new_steps[1].host_forecast_steps = 3;
  o.new_steps[1].host_threshold_steps = 2;
  o.new_steps[1].host_growth_bytes_per_step = 8 << 20;
  rec.Reconcile(o);
  const MemoryStatus& m = rec.status().memory;
  ASSERT_TRUE(m.forecast_steps_to_limit);
  EXPECT_EQ(*m.forecast_steps_to_limit, 3);
  EXPECT_EQ(m.growth_bytes_per_step, 8 << 20);
  auto pressure = [&] {
    for (const Condition& c : rec.status().conditions) {
      if (c.type == "MemoryPressure") return c.status;
    }
    return std::string("absent");
  };
  EXPECT_EQ(pressure(), "True");  // threshold within horizonSteps (2)
  // A step where neither rank forecasts a crossing clears it.
  Observation calm = s.Running({6});
  rec.Reconcile(calm);
  EXPECT_FALSE(rec.status().memory.forecast_steps_to_limit);
  EXPECT_EQ(pressure(), "False");
}

TEST(JobReconciler, StepsLostAreSettledFromTheResumedStepWhenNoCheckpointIsVisible) {
  JobReconciler rec(MakeJob(), Options(/*guard=*/false));
  rec.Reconcile(Observation{});
  rec.Reconcile(Script{}.Running({1, 2, 3, 4, 5, 6}));
  NextStep next = rec.Reconcile(Script{}.Ended({Exit(1, "segfault")}));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(rec.status().steps_lost, 0);  // not known yet
  EXPECT_EQ(rec.status().actions.back().type, ActionType::kRestartAfterCrash);
  rec.Reconcile(Script{.generation = 2}.Running({5}));  // resumed from checkpoint step 4
  EXPECT_EQ(rec.status().steps_lost, 2);
}

TEST(JobReconciler, OneRankCrashingKillsTheOthersThenRestarts) {
  JobReconciler rec(MakeJob(2), Options(false));
  rec.Reconcile(Observation{});
  Script s{.generation = 1, .ranks = 2};
  Observation half = s.Running();
  half.ranks[1].running = false;
  half.ranks[1].exit = Exit(1, "boom");
  NextStep next = rec.Reconcile(half);
  EXPECT_EQ(next.kind, Kind::kKill);
  EXPECT_NE(next.reason.find("rank 1"), std::string::npos);
  EXPECT_EQ(rec.Reconcile(half).kind, Kind::kWait);  // kill sent once
  next = rec.Reconcile(s.Ended({Exit(137), Exit(1, "boom")}, 0));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(rec.status().oom_kills, 0);
  EXPECT_NE(rec.status().actions.back().reason.find("rank 1 crashed"), std::string::npos);
}

TEST(JobReconciler, CleanExitOfOneRankWaitsForPeersThenKills) {
  JobReconciler rec(MakeJob(2), Options());
  rec.Reconcile(Observation{});
  Script s{.generation = 1, .ranks = 2};
  Observation half = s.Running();
  half.ranks[0].running = false;
  half.ranks[0].exit = Exit(75);
  EXPECT_EQ(rec.Reconcile(half).kind, Kind::kWait);
  half.now += milliseconds(999);
  EXPECT_EQ(rec.Reconcile(half).kind, Kind::kWait);
  half.now += milliseconds(1);
  EXPECT_EQ(rec.Reconcile(half).kind, Kind::kKill);
}

TEST(JobReconciler, GivesUpAfterMaxRestartsWithTheReason) {
  JobReconciler rec(MakeJob(), Options(false));  // maxRestarts 3
  rec.Reconcile(Observation{});
  for (int g = 1; g <= 3; ++g) {
    Script s{.generation = g};
    rec.Reconcile(s.Running({g}));
    ASSERT_EQ(rec.Reconcile(s.Ended({Exit(137, "", true)}, 0)).kind, Kind::kLaunch) << g;
  }
  Script s{.generation = 4};
  NextStep next = rec.Reconcile(s.Ended({Exit(137, "", true)}, 0));
  EXPECT_EQ(next.kind, Kind::kFinished);
  EXPECT_EQ(rec.status().phase, JobPhase::kFailed);
  EXPECT_NE(rec.status().message.find("gave up after 3 restarts"), std::string::npos) << rec.status().message;
  EXPECT_NE(rec.status().message.find("OOM-killed"), std::string::npos);
  EXPECT_EQ(rec.status().actions.back().type, ActionType::kFail);
  EXPECT_EQ(rec.status().oom_kills, 4);
  EXPECT_EQ(rec.Reconcile(Observation{}).kind, Kind::kFinished);
}

TEST(JobReconciler, InvalidSpecFailsAtOnce) {
  JobReconciler rec(MakeJob(), Options());
  rec.Reconcile(Observation{});
  NextStep next = rec.Reconcile(Script{}.Ended({Exit(2, "spec.grpo.groupSize: must be >= 2")}));
  EXPECT_EQ(next.kind, Kind::kFinished);
  EXPECT_EQ(rec.status().phase, JobPhase::kFailed);
  EXPECT_NE(rec.status().message.find("groupSize"), std::string::npos);
}

// The real worker prints why it cannot start on stderr and writes no termination message:
// the reason comes from its output, first, for every place the message reaches (status,
// the Failed condition, the fail action a progress view and the summary show).
TEST(JobReconciler, AWorkerThatRefusesToStartFailsWithItsOwnReasonFirst) {
  JobReconciler rec(MakeJob(), Options());
  rec.Reconcile(Observation{});
  RankExit refused = Exit(2);
  refused.last_output =
      "[2026-01-01 00:00:00.000] [info] loading /m/model.safetensors\n"
      "/m/model.safetensors: tensor model.norm.weight: data offsets [0, 9999) past the end of the file\n"
      "[W init.cpp:12] Warning: something\n";
  NextStep next = rec.Reconcile(Script{}.Ended({refused}));
  EXPECT_EQ(next.kind, Kind::kFinished);
  EXPECT_EQ(rec.status().phase, JobPhase::kFailed);
  const std::string message = rec.status().message;
  EXPECT_EQ(message.rfind("/m/model.safetensors: tensor model.norm.weight", 0), 0u) << message;
  EXPECT_NE(message.find("rank 0 refused to start (exit 2)"), std::string::npos) << message;
  ASSERT_FALSE(rec.status().actions.empty());
  EXPECT_EQ(rec.status().actions.back().type, ActionType::kFail);
  EXPECT_EQ(rec.status().actions.back().reason, message);
}

// A reason the worker states (core/protocol's WorkerErrorMessage) is kept whole, however
// long and however many lines: in a crash's restart action and in a refusal's Failed
// message, no 200- or 300-byte cut and no line dropped.
TEST(JobReconciler, AStatedReasonIsKeptWhole) {
  std::string reason = "cannot write /data/checkpoints/step-000010.partial/rank-00000.bin:";
  for (int i = 0; reason.size() < 2000; ++i)
    reason += "\n  detail line " + std::to_string(i) + " of the worker's reason";
  JobReconciler crashed(MakeJob(), Options());
  crashed.Reconcile(Observation{});
  crashed.Reconcile(Script{}.Ended({Exit(1, protocol::WorkerErrorMessage(reason))}, 0));
  ASSERT_FALSE(crashed.status().actions.empty());
  EXPECT_NE(crashed.status().actions.back().reason.find(reason), std::string::npos)
      << crashed.status().actions.back().reason;
  JobReconciler refused(MakeJob(), Options());
  refused.Reconcile(Observation{});
  refused.Reconcile(Script{}.Ended({Exit(2, protocol::WorkerErrorMessage(reason))}));
  EXPECT_EQ(refused.status().message.rfind(reason, 0), 0u) << refused.status().message;
}

// A worker the kernel kills while still reading its inputs (no step finished, no "loaded"
// phase written) is not a memory problem the guard can solve: after two plain restarts the
// job ends naming the inputs, instead of resharding and shrinking through every setting.
TEST(JobReconciler, OomKillsBeforeAnyStepEndPointingAtTheInputs) {
  JobReconciler rec(MakeJob(), Options());
  rec.Reconcile(Observation{});
  for (int g = 1; g <= 2; ++g) {
    Script s{.generation = g, .ranks = rec.status().workers};
    std::vector<RankExit> exits(static_cast<size_t>(rec.status().workers), Exit(137, "", true));
    ASSERT_EQ(rec.Reconcile(s.Ended(exits)).kind, Kind::kLaunch) << g << ": " << rec.status().message;
  }
  Script s{.generation = 3, .ranks = rec.status().workers};
  std::vector<RankExit> exits(static_cast<size_t>(rec.status().workers), Exit(137, "", true));
  EXPECT_EQ(rec.Reconcile(s.Ended(exits)).kind, Kind::kFinished);
  EXPECT_EQ(rec.status().phase, JobPhase::kFailed);
  EXPECT_EQ(rec.status().message.rfind("out of memory before the first step, 3 times in a row", 0), 0u)
      << rec.status().message;
  EXPECT_NE(rec.status().message.find("spec.task.dataset"), std::string::npos) << rec.status().message;
}

// The worker's "loaded" phase tells a kill while loading (plain restarts, the job as it
// was, named so) from one in the first step (the guard's, like any step's, and never the
// inputs' limit).
TEST(JobReconciler, AnOomKillWhileLoadingIsNotTheGuardsButOneInTheFirstStepIs) {
  JobReconciler loading(MakeJob(), Options());
  loading.Reconcile(Observation{});
  for (int g = 1; g <= 2; ++g) {
    Script s{.generation = g, .ranks = loading.status().workers};
    std::vector<RankExit> exits(static_cast<size_t>(loading.status().workers), Exit(137, "", true));
    const NextStep next = loading.Reconcile(s.Ended(exits));
    ASSERT_EQ(next.kind, Kind::kLaunch) << g << ": " << loading.status().message;
    EXPECT_EQ(next.launch.job, MakeJob()) << "the guard changed the job for a kill while loading";
    EXPECT_EQ(loading.status().actions.back().type, ActionType::kRestartAfterOOMKill);
    EXPECT_NE(loading.status().actions.back().reason.find(
                  "OOM-killed by the kernel while loading its model and data, before step 1"),
              std::string::npos)
        << loading.status().actions.back().reason;
  }

  JobReconciler stepping(MakeJob(), Options());
  stepping.Reconcile(Observation{});
  bool guard_acted = false;
  for (int g = 1; g <= 3; ++g) {
    Script s{.generation = g, .ranks = stepping.status().workers};
    std::vector<RankExit> exits(static_cast<size_t>(stepping.status().workers),
                                Exit(137, protocol::LoadedPhaseMessage(1), true));
    const NextStep next = stepping.Reconcile(s.Ended(exits));
    ASSERT_EQ(next.kind, Kind::kLaunch) << g << ": " << stepping.status().message;
    EXPECT_NE(stepping.status().actions.back().reason.find("OOM-killed by the kernel during step 1"), std::string::npos)
        << stepping.status().actions.back().reason;
    guard_acted = guard_acted || !(next.launch.job == MakeJob());
  }
  EXPECT_TRUE(guard_acted) << "the guard never acted on kills in the first step";
}

// Kills during steps keep the guard's escalation: a step between two kills resets the count.
TEST(JobReconciler, OomKillsAfterStepsKeepTheGuardsEscalation) {
  JobReconciler rec(MakeJob(), Options());
  rec.Reconcile(Observation{});
  for (int g = 1; g <= 3; ++g) {
    Script s{.generation = g, .ranks = rec.status().workers};
    if (g != 2) rec.Reconcile(s.Running({g}));
    std::vector<RankExit> exits(static_cast<size_t>(rec.status().workers), Exit(137, "", true));
    ASSERT_EQ(rec.Reconcile(s.Ended(exits)).kind, Kind::kLaunch) << g << ": " << rec.status().message;
  }
}

TEST(JobReconciler, StopRequestDrainsAndEndsSuspended) {
  JobReconciler rec(MakeJob(2), Options());
  rec.Reconcile(Observation{});
  Script s{.generation = 1, .ranks = 2};
  rec.Reconcile(s.Running({1, 2}));
  rec.RequestStop("interrupted (Ctrl-C)");
  NextStep next = rec.Reconcile(s.Running({3}));
  ASSERT_EQ(next.kind, Kind::kDrain);
  EXPECT_GT(next.grace.count(), 0);
  EXPECT_EQ(rec.Reconcile(s.Running()).kind, Kind::kWait);  // drain sent once
  next = rec.Reconcile(s.Ended({Exit(75), Exit(75)}, 3));
  EXPECT_EQ(next.kind, Kind::kFinished);
  EXPECT_EQ(rec.status().phase, JobPhase::kSuspended);
  EXPECT_EQ(rec.status().actions.back().type, ActionType::kSuspend);
  EXPECT_NE(rec.status().message.find("checkpoint at step 3 is resumable"), std::string::npos);
}

TEST(JobReconciler, UnrequestedDrainResumes) {
  JobReconciler rec(MakeJob(), Options());
  rec.Reconcile(Observation{});
  NextStep next = rec.Reconcile(Script{}.Ended({Exit(75)}, 5));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(rec.status().actions.back().type, ActionType::kResume);
}

RankExit Disrupted(RankExit e, const std::string& why) {
  e.disruption = why;
  return e;
}

// A pod preempted or evicted drains its ranks to a checkpoint (75): the job resumes from
// it, the cause in the action, and neither status.restarts nor maxRestarts counts it.
TEST(JobReconciler, ADisruptionResumesWithoutCountingARestart) {
  spec::TrainingJob job = MakeJob(2);
  job.spec.memory_guard.max_restarts = 0;  // a counted relaunch would fail the job
  JobReconciler rec(job, Options());
  rec.Reconcile(Observation{});
  Script g1{.generation = 1, .ranks = 2};
  rec.Reconcile(g1.Running({1, 2, 3, 4}));
  NextStep next =
      rec.Reconcile(g1.Ended({Disrupted(Exit(75), "pod unit-worker-0 was preempted by the scheduler"), Exit(75)}, 4));
  ASSERT_EQ(next.kind, Kind::kLaunch) << rec.status().message;
  EXPECT_EQ(next.launch.job.spec.workers, 2);
  EXPECT_EQ(rec.status().restarts, 0);
  EXPECT_EQ(rec.status().reshards, 0);
  EXPECT_EQ(rec.status().steps_lost, 0);
  EXPECT_EQ(rec.status().phase, JobPhase::kRestarting);
  ASSERT_TRUE(rec.status().last_action);
  const ActionRecord& a = *rec.status().last_action;
  EXPECT_EQ(a.type, ActionType::kResumeAfterDisruption);
  EXPECT_STREQ(ToWireName(a.type), "resumeAfterDisruption");
  EXPECT_EQ(a.step, 4);
  EXPECT_NE(a.reason.find("rank 0: pod unit-worker-0 was preempted by the scheduler"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find("checkpoint at step 4"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find("not counted as a restart"), std::string::npos) << a.reason;

  // The next generation resumes right after the checkpoint: nothing lost. A second
  // disruption (an eviction this time) is free too.
  Script g2{.generation = 2, .ranks = 2};
  rec.Reconcile(g2.Running({5, 6}));
  EXPECT_EQ(rec.status().steps_lost, 0);
  next = rec.Reconcile(g2.Ended({Exit(75), Disrupted(Exit(75), "pod unit-worker-1 was evicted by a node drain")}, 6));
  ASSERT_EQ(next.kind, Kind::kLaunch) << rec.status().message;
  EXPECT_EQ(rec.status().restarts, 0);
  EXPECT_NE(rec.status().last_action->reason.find("rank 1: pod unit-worker-1 was evicted by a node drain"),
            std::string::npos)
      << rec.status().last_action->reason;
  EXPECT_EQ(rec.Reconcile(Script{.generation = 3, .ranks = 2}.Ended({Exit(0), Exit(0)})).kind, Kind::kFinished);
  EXPECT_EQ(rec.status().phase, JobPhase::kSucceeded);
  EXPECT_EQ(rec.status().restarts, 0);
  EXPECT_EQ(rec.status().disruptions, 2);
  EXPECT_EQ(ToJson(rec.status()).value("disruptions", 0), 2);

  // The same drain without a cause is a restart, which maxRestarts 0 does not allow.
  JobReconciler plain(job, Options());
  plain.Reconcile(Observation{});
  EXPECT_EQ(plain.Reconcile(g1.Ended({Exit(75), Exit(75)}, 4)).kind, Kind::kFinished);
  EXPECT_EQ(plain.status().phase, JobPhase::kFailed);
}

// A disrupted rank killed before it drained (its grace period ran out, or its pod vanished
// without an end): the steps since the checkpoint are lost and counted, still no restart.
TEST(JobReconciler, ADisruptionThatKilledARankCountsTheStepsLostButNoRestart) {
  JobReconciler rec(MakeJob(2), Options());
  rec.Reconcile(Observation{});
  Script s{.generation = 1, .ranks = 2};
  rec.Reconcile(s.Running({1, 2, 3, 4, 5, 6, 7}));
  RankExit gone{protocol::kExitKilled, false, "PodDeleted", "the pod was deleted before its container reported"};
  NextStep next = rec.Reconcile(
      s.Ended({Disrupted(gone, "pod unit-worker-0 was evicted by a node drain"), Exit(protocol::kExitKilled)}, 5));
  ASSERT_EQ(next.kind, Kind::kLaunch) << rec.status().message;
  EXPECT_EQ(rec.status().restarts, 0);
  EXPECT_EQ(rec.status().oom_kills, 0);
  EXPECT_EQ(rec.status().steps_lost, 2);  // 7 reached, 5 checkpointed
  EXPECT_EQ(rec.status().last_action->type, ActionType::kResumeAfterDisruption);
  EXPECT_NE(rec.status().last_action->reason.find("2 step(s) lost"), std::string::npos)
      << rec.status().last_action->reason;
  EXPECT_EQ(next.launch.job, MakeJob(2)) << "a disruption changes nothing in the spec";
}

// An out-of-memory end beside a disruption is the job's own: the guard's restart, counted.
// A stop the user asked for still ends Suspended.
TEST(JobReconciler, OutOfMemoryAndStopRequestsOutweighADisruption) {
  JobReconciler rec(MakeJob(2), Options());
  rec.Reconcile(Observation{});
  Script s{.generation = 1, .ranks = 2};
  rec.Reconcile(s.Running({1, 2}));
  NextStep next =
      rec.Reconcile(s.Ended({Disrupted(Exit(75), "pod unit-worker-0 was preempted"), Exit(137, "", true)}, 2));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(rec.status().last_action->type, ActionType::kRestartAfterOOMKill);
  EXPECT_EQ(rec.status().restarts, 1);

  JobReconciler stopping(MakeJob(2), Options());
  stopping.Reconcile(Observation{});
  stopping.RequestStop("spec.suspend is true");
  stopping.Reconcile(s.Running({1}));
  stopping.Reconcile(s.Ended({Disrupted(Exit(75), "pod unit-worker-1 was preempted"), Exit(75)}, 1));
  EXPECT_EQ(stopping.status().phase, JobPhase::kSuspended);
  EXPECT_EQ(stopping.status().actions.back().type, ActionType::kSuspend);
}

TEST(JobReconciler, ScaleRequestDrainsAndReshards) {
  JobReconciler rec(MakeJob(1), Options());
  rec.Reconcile(Observation{});
  rec.RequestWorkers(2);
  ASSERT_EQ(rec.Reconcile(Script{}.Running({1})).kind, Kind::kDrain);
  NextStep next = rec.Reconcile(Script{}.Ended({Exit(75)}, 1));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(next.launch.job.spec.workers, 2);
  EXPECT_EQ(rec.status().reshards, 1);
  EXPECT_EQ(rec.status().actions.back().type, ActionType::kScale);
}

// A scale request's drain whose first failure is a rank ended by the drain's own signals
// (SIGTERM before the worker's handler: 143; SIGKILL at the grace's end or a pod deleted
// before it reported: 137) still reshards, from the checkpoint, the steps since it lost;
// no restart. A peer failing after it (exit 1: its collective lost the rank) changes
// nothing. A crash of its own or an OOM kill is what it always was.
// Two ranks at step 3 (checkpoint at 2) drained for `kubectl scale` to 1; they end with
// `ends`. What the reconciler does next.
NextStep EndAScaleDrain(JobReconciler& rec, const std::vector<RankExit>& ends) {
  rec.Reconcile(Observation{});
  const Script two{.ranks = 2};
  rec.Reconcile(two.Running({1, 2, 3}));
  rec.RequestWorkers(1);
  EXPECT_EQ(rec.Reconcile(two.Running()).kind, Kind::kDrain);
  return rec.Reconcile(two.Ended(ends, 2));
}

TEST(JobReconciler, AScaleDrainThatKillsRanksStillReshards) {
  for (const std::vector<RankExit>& ends :
       {std::vector<RankExit>{Exit(143), Exit(143)}, std::vector<RankExit>{Exit(75), Exit(137)},
        std::vector<RankExit>{Exit(143), Exit(1, "peer gone")}}) {
    SCOPED_TRACE(ends[0].reason + ", " + ends[1].reason);
    JobReconciler rec(MakeJob(2), Options());
    const NextStep next = EndAScaleDrain(rec, ends);
    ASSERT_EQ(next.kind, Kind::kLaunch) << next.reason;
    EXPECT_EQ(next.launch.job.spec.workers, 1);
    EXPECT_EQ(rec.status().reshards, 1);
    EXPECT_EQ(rec.status().restarts, 0);
    EXPECT_EQ(rec.status().steps_lost, 1);
    EXPECT_EQ(rec.status().actions.back().type, ActionType::kScale);
    EXPECT_NE(rec.status().actions.back().reason.find("did not drain"), std::string::npos)
        << rec.status().actions.back().reason;
  }
  for (const RankExit& crash : {Exit(1, "boom"), Exit(137, "", /*oom=*/true)}) {
    SCOPED_TRACE(crash.reason);
    JobReconciler rec(MakeJob(2), Options());
    const NextStep next = EndAScaleDrain(rec, {Exit(75), crash});
    ASSERT_EQ(next.kind, Kind::kLaunch) << next.reason;
    EXPECT_NE(rec.status().actions.back().type, ActionType::kScale);
    EXPECT_EQ(rec.status().actions.back().reason.find("on request"), std::string::npos)
        << rec.status().actions.back().reason;
  }
  // Without a drain, a SIGTERM death is a crash like any other.
  JobReconciler rec(MakeJob(2), Options());
  rec.Reconcile(Observation{});
  const Script two{.ranks = 2};
  rec.Reconcile(two.Running({1, 2, 3}));
  ASSERT_EQ(rec.Reconcile(two.Ended({Exit(143), Exit(137)}, 2)).kind, Kind::kLaunch);
  EXPECT_EQ(rec.status().restarts, 1);
  EXPECT_EQ(rec.status().actions.back().type, ActionType::kRestartAfterCrash);
}

TEST(JobReconciler, WithoutTheGuardDecisionsAreNotAppliedButCrashesStillRestart) {
  JobReconciler rec(MakeJob(), Options(/*guard=*/false));
  NextStep next = rec.Reconcile(Observation{});
  EXPECT_FALSE(next.launch.job.spec.memory_guard.enabled);
  guard::Decision d;
  d.action = guard::DecisionAction::kReshard;
  d.target_workers = 2;
  next = rec.Reconcile(Script{}.Ended({Exit(76, d.ToJson())}, 2));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(next.launch.job.spec.workers, 1);
  EXPECT_EQ(rec.status().actions.back().type, ActionType::kResume);
}

TEST(JobReconciler, StepsFromAnOldGenerationAreIgnored) {
  JobReconciler rec(MakeJob(), Options());
  rec.Reconcile(Observation{});
  rec.Reconcile(Script{}.Ended({Exit(76, GuardJson(guard::DecisionAction::kRestart, 0))}, 0));
  Observation late = Script{.generation = 2}.Running();
  protocol::StepRecord old;
  old.generation = 1;
  old.step = 99;
  late.new_steps.push_back(old);
  rec.Reconcile(late);
  EXPECT_EQ(rec.status().step, 0);
}

TEST(JobReconciler, StatusJsonNamesPhaseAndMemory) {
  JobReconciler rec(MakeJob(), Options());
  rec.Reconcile(Observation{});
  rec.Reconcile(Script{}.Running({1, 2, 3, 4, 5, 6}));
  const nlohmann::json j = ToJson(rec.status());
  EXPECT_EQ(j["phase"], "Running");
  EXPECT_EQ(j["step"], 6);
  EXPECT_EQ(j["memory"]["hostLimitBytes"], 1LL << 30);
  EXPECT_GT(j["memory"]["growthBytesPerStep"].get<double>(), 0);
}

}  // namespace
}  // namespace headroom::runtime

namespace headroom::runtime {
namespace {

TEST(JobReconciler, RestoredStateCarriesOnWhereTheLastSupervisorLeftOff) {
  JobReconciler first(MakeJob(), Options());
  first.Reconcile(Observation{});
  first.Reconcile(Script{}.Running({1, 2, 3}));
  first.Reconcile(Script{}.Ended({Exit(76, GuardJson(guard::DecisionAction::kRestart, 3))}, 3));
  ASSERT_EQ(first.status().generation, 2);

  JobReconciler second(MakeJob(), Options());
  second.Restore(first.status(), first.guard_history(), first.current_job());
  EXPECT_EQ(second.Reconcile(Script{.generation = 2}.Running({4})).kind, Kind::kWait);
  EXPECT_EQ(second.status().phase, JobPhase::kRunning);
  EXPECT_EQ(second.status().restarts, 1);
  NextStep next = second.Reconcile(Script{.generation = 2}.Ended({Exit(137, "", true)}, 3));
  ASSERT_EQ(next.kind, Kind::kLaunch);
  EXPECT_EQ(next.launch.generation, 3);
  EXPECT_EQ(second.status().steps_lost, 1);
  EXPECT_EQ(second.status().actions.size(), 2u);
}

// Suspend, then resume (the operator does this when spec.suspend goes back to false): a
// fresh reconciler restored from the suspended status relaunches without calling it a
// restart, even with maxRestarts used up.
TEST(JobReconciler, ResumingASuspendedJobIsNotARestart) {
  spec::TrainingJob job = MakeJob();
  job.spec.memory_guard.max_restarts = 0;
  JobReconciler first(job, Options());
  first.Reconcile(Observation{});
  first.Reconcile(Script{}.Running({1, 2}));
  first.RequestStop("spec.suspend is true");
  ASSERT_EQ(first.Reconcile(Script{}.Running()).kind, Kind::kDrain);
  first.Reconcile(Script{}.Ended({Exit(75)}, 2));
  ASSERT_EQ(first.status().phase, JobPhase::kSuspended);

  JobStatus resumed = first.status();
  resumed.phase = JobPhase::kPending;
  JobReconciler second(job, Options());
  second.Restore(resumed, first.guard_history(), first.current_job());
  second.Resume("spec.suspend is false");
  NextStep next = second.Reconcile(Script{}.Ended({Exit(75)}, 2));
  ASSERT_EQ(next.kind, Kind::kLaunch) << second.status().message;
  EXPECT_EQ(next.launch.generation, 2);
  EXPECT_EQ(second.status().restarts, 0);
  EXPECT_EQ(second.status().actions.back().type, ActionType::kUnsuspend);
  EXPECT_EQ(second.Reconcile(Script{.generation = 2}.Running({3})).kind, Kind::kWait);
  EXPECT_EQ(second.status().steps_lost, 0);
  EXPECT_EQ(second.status().phase, JobPhase::kRunning);
}

// spec.activeDeadlineSeconds, as a Job's: once the job has been active that long (from
// its first launch, on the observations' clock) the ranks drain and the job fails with
// reason DeadlineExceeded; nothing is relaunched, not even after a crash.
TEST(JobReconciler, ActiveDeadlineDrainsAndFailsWithDeadlineExceeded) {
  spec::TrainingJob job = MakeJob(2);
  job.spec.active_deadline_seconds = 60;
  JobReconciler rec(job, Options());
  Script g1{.generation = 1, .ranks = 2};
  Observation first;
  first.now = g1.t0;
  ASSERT_EQ(rec.Reconcile(first).kind, Kind::kLaunch);
  EXPECT_EQ(rec.Reconcile(g1.Running({1, 2})).kind, Kind::kWait);
  Script late = g1;
  late.t0 = g1.t0 + std::chrono::seconds(59);
  EXPECT_EQ(rec.Reconcile(late.Running({3})).kind, Kind::kWait) << "59 s of 60";
  late.t0 = g1.t0 + std::chrono::seconds(60);
  NextStep next = rec.Reconcile(late.Running({4}));
  ASSERT_EQ(next.kind, Kind::kDrain);
  EXPECT_NE(next.reason.find("spec.activeDeadlineSeconds (60 s) exceeded"), std::string::npos) << next.reason;
  EXPECT_EQ(rec.Reconcile(late.Running()).kind, Kind::kWait);  // drained once
  next = rec.Reconcile(late.Ended({Exit(75), Exit(75)}, 4));
  EXPECT_EQ(next.kind, Kind::kFinished);
  EXPECT_EQ(rec.status().phase, JobPhase::kFailed);
  bool deadline_condition = false;
  for (const Condition& c : rec.status().conditions) {
    deadline_condition =
        deadline_condition || (c.type == "Failed" && c.status == "True" && c.reason == "DeadlineExceeded");
  }
  EXPECT_TRUE(deadline_condition) << rec.status().message;
  EXPECT_EQ(rec.status().restarts, 0);

  // A crash past the deadline is not restarted either.
  JobReconciler crashed(job, Options());
  crashed.Reconcile(first);
  EXPECT_EQ(crashed.Reconcile(late.Ended({Exit(137, "", true), Exit(75)}, 3)).kind, Kind::kFinished);
  EXPECT_EQ(crashed.status().phase, JobPhase::kFailed);
  EXPECT_EQ(crashed.status().restarts, 0);

  // Without the field the same clock changes nothing.
  JobReconciler unbounded(MakeJob(2), Options());
  unbounded.Reconcile(first);
  EXPECT_EQ(unbounded.Reconcile(late.Running({1})).kind, Kind::kWait);
  EXPECT_EQ(unbounded.status().phase, JobPhase::kRunning);
}

// A supervisor that picks a job up (the operator after a restart) counts from when the job
// became active, not from its own start; a generation that succeeds while draining succeeds.
TEST(JobReconciler, ARestoredJobKeepsItsDeadlineAndASuccessStillSucceeds) {
  spec::TrainingJob job = MakeJob();
  job.spec.active_deadline_seconds = 30;
  JobReconciler first(job, Options());
  Script g{.generation = 1};
  Observation o;
  o.now = g.t0;
  first.Reconcile(o);
  first.Reconcile(g.Running({1}));

  JobReconciler second(job, Options());
  second.Restore(first.status(), first.guard_history(), first.current_job());
  second.SetActiveSince(g.t0 - std::chrono::seconds(31));
  ASSERT_EQ(second.Reconcile(g.Running({2})).kind, Kind::kDrain);
  EXPECT_EQ(second.Reconcile(g.Ended({Exit(0)})).kind, Kind::kFinished);
  EXPECT_EQ(second.status().phase, JobPhase::kSucceeded);
}

TEST(JobReconciler, MarkFailedEndsTheJobWithTheReason) {
  JobReconciler rec(MakeJob(), Options());
  rec.Reconcile(Observation{});
  rec.MarkFailed("could not start generation 1: no worker binary");
  EXPECT_EQ(rec.status().phase, JobPhase::kFailed);
  EXPECT_EQ(rec.Reconcile(Observation{}).kind, Kind::kFinished);
  EXPECT_EQ(rec.status().actions.back().type, ActionType::kFail);
}

}  // namespace
}  // namespace headroom::runtime

namespace headroom::runtime {
namespace {

TEST(JobReconciler, AGenerationThatResumesFromFurtherBackThanPlannedCountsTheRedoneSteps) {
  JobReconciler rec(MakeJob(), Options());
  rec.Reconcile(Observation{});
  rec.Reconcile(Script{}.Running({1, 2, 3, 4, 5}));
  ASSERT_EQ(rec.Reconcile(Script{}.Ended({Exit(76, GuardJson(guard::DecisionAction::kRestart, 5))}, 5)).kind,
            Kind::kLaunch);
  rec.Reconcile(Script{.generation = 2}.Running({1}));  // the worker did not resume at all
  EXPECT_EQ(rec.status().steps_lost, 5);
}

}  // namespace
}  // namespace headroom::runtime
