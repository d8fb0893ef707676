// The step loop's two components: the checkpointer (resume, cadence, save at a stop,
// another run's checkpoint refused, a new run started from a checkpoint's weights) and the
// step telemetry (what it measures of a step, and that publishing the step's record writes
// the step log).
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/worker/helpers/example_text_task.h"
#include "worker/checkpoint/checkpoint_format.h"
#include "worker/checkpoint/checkpoint_reader.h"
#include "worker/comm/communicator.h"
#include "worker/train/checkpointer.h"
#include "worker/train/grpo_trainer.h"
#include "worker/train/step_report.h"
#include "worker/train/step_telemetry.h"

namespace headroom::worker {
namespace {

namespace fs = std::filesystem;

spec::TrainingJobSpec SmallJob(int steps, int every) {
  spec::TrainingJobSpec spec;
  spec.model.preset = "tiny";
  spec.task = {"addition", 1, 4};
  spec.grpo.steps = steps;
  spec.grpo.prompts_per_step = 2;
  spec.grpo.group_size = 2;
  spec.grpo.max_prompt_length = 5;
  spec.grpo.max_response_length = 2;
  spec.grpo.micro_batch_size = 4;
  spec.grpo.kl_coef = 0;
  spec.resources.memory_bytes = 2LL << 30;
  spec.checkpoint.every_steps = every;
  spec.checkpoint.keep = 10;
  return spec;
}

class TrainComponentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("headroom-train-components-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(TrainComponentsTest, CheckpointerSavesOnItsCadenceAndAfterTheLastStep) {
  const spec::TrainingJobSpec spec = SmallJob(12, 5);
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(spec, *comm, torch::kCPU);
  Checkpointer checkpointer(dir_.string(), spec, *comm, 0, trainer);
  EXPECT_EQ(checkpointer.Resume(), 0) << "an empty directory: a fresh start";
  std::vector<int64_t> saved;
  for (int64_t done = 1; done <= 12; ++done) {
    if (const auto stats = checkpointer.AfterStep(done)) {
      saved.push_back(done);
      EXPECT_EQ(stats->step, done);
      EXPECT_GT(stats->total_bytes, 0u);
    }
  }
  EXPECT_EQ(saved, (std::vector<int64_t>{5, 10, 12}));
  EXPECT_EQ(CompleteSteps(dir_), (std::vector<int64_t>{5, 10, 12}));
  // A stop at a boundary already on disk writes nothing more; a new one is saved.
  EXPECT_FALSE(checkpointer.Save(12));
  EXPECT_TRUE(checkpointer.Save(13));
}

TEST_F(TrainComponentsTest, CheckpointerResumesWhereTheLastSaveLeftOffAndRefusesAnotherRuns) {
  const spec::TrainingJobSpec spec = SmallJob(10, 3);
  auto comm = MakeLocalCommunicator();
  {
    GrpoTrainer trainer(spec, *comm, torch::kCPU);
    Checkpointer first(dir_.string(), spec, *comm, 0, trainer);
    ASSERT_EQ(first.Resume(), 0);
    for (int64_t done = 1; done <= 4; ++done) first.AfterStep(done);
  }
  GrpoTrainer trainer(spec, *comm, torch::kCPU);
  Checkpointer again(dir_.string(), spec, *comm, 0, trainer);
  EXPECT_EQ(again.Resume(), 3);
  EXPECT_FALSE(again.Save(3)) << "the resumed step is on disk already";

  spec::TrainingJobSpec other = spec;
  other.task.seed += 1;  // defines another run
  GrpoTrainer other_trainer(other, *comm, torch::kCPU);
  Checkpointer refused(dir_.string(), other, *comm, 0, other_trainer);
  EXPECT_THROW(refused.Resume(), CheckpointOfAnotherRun);
}

// model.init: checkpoint starts from a checkpoint's model weights: the directory's latest
// step, or a named step directory; a missing one is named.
// Intact steps and no `latest`: the run resumes from the newest step, never from scratch
// over them, and `latest` names it again.
TEST_F(TrainComponentsTest, CheckpointerResumesFromTheNewestStepWhenLatestIsMissing) {
  const spec::TrainingJobSpec spec = SmallJob(20, 5);
  auto comm = MakeLocalCommunicator();
  {
    GrpoTrainer trainer(spec, *comm, torch::kCPU);
    Checkpointer first(dir_.string(), spec, *comm, 0, trainer);
    ASSERT_EQ(first.Resume(), 0);
    for (int64_t done = 1; done <= 18; ++done) first.AfterStep(done);
    ASSERT_TRUE(first.Save(18));
  }
  ASSERT_EQ(CompleteSteps(dir_), (std::vector<int64_t>{5, 10, 15, 18}));
  fs::remove(dir_ / kLatestFileName);
  GrpoTrainer trainer(spec, *comm, torch::kCPU);
  Checkpointer again(dir_.string(), spec, *comm, 0, trainer);
  EXPECT_EQ(again.Resume(), 18) << "a missing latest started the training over";
  EXPECT_EQ(checkpoint::ReadWholeFile(dir_ / kLatestFileName), "step-000018\n");
}

// A tmpfs at `dir` (needs CAP_SYS_ADMIN); `error()` says why not.
class SmallFilesystem {
 public:
  SmallFilesystem(const fs::path& dir, const std::string& options) : dir_(dir) {
    fs::create_directories(dir);
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) != 0) error_ = std::strerror(errno);
  }
  ~SmallFilesystem() {
    if (error_.empty()) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool Remount(const std::string& options, unsigned long flags = 0) {
    return ::mount("tmpfs", dir_.c_str(), "tmpfs", MS_REMOUNT | flags, options.c_str()) == 0;
  }
  const std::string& error() const { return error_; }

 private:
  fs::path dir_;
  std::string error_;
};

// A save the storage refuses is tried once more (nothing retrained), and refused the same
// way again it stops with CheckpointUnusable (the worker exits 2): a full disk and a
// read-only filesystem.
TEST_F(TrainComponentsTest, ASaveTheStorageRefusesTwiceStopsAfterTheOneRetry) {
  const spec::TrainingJobSpec spec = SmallJob(12, 5);
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(spec, *comm, torch::kCPU);
  for (const bool read_only : {false, true}) {
    const fs::path ckpt = dir_ / (read_only ? "ro" : "full");
    SmallFilesystem disk(ckpt, "size=1m");
    if (!disk.error().empty()) GTEST_SKIP() << "cannot mount a tmpfs (needs root): " << disk.error();
    Checkpointer checkpointer(ckpt.string(), spec, *comm, 0, trainer);
    ASSERT_EQ(checkpointer.Resume(), 0);
    ASSERT_TRUE(read_only ? disk.Remount("size=1m", MS_RDONLY) : disk.Remount("size=4k")) << std::strerror(errno);
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    try {
      checkpointer.Save(5);
      ADD_FAILURE() << "the save succeeded";
    } catch (const CheckpointUnusable& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(std::strerror(read_only ? EROFS : ENOSPC)), std::string::npos) << what;
      EXPECT_NE(what.find("the same on the retry"), std::string::npos) << what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "stopped without its one retry, as another failure: " << e.what();
    }
    const std::string warned = ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
    size_t retries = 0;
    for (size_t at = warned.find("trying once more"); at != std::string::npos;
         at = warned.find("trying once more", at + 1)) {
      ++retries;
    }
    EXPECT_EQ(retries, 1u) << warned;
    EXPECT_TRUE(CompleteSteps(ckpt).empty());
  }
}

TEST_F(TrainComponentsTest, InitCheckpointStartsFromTheCheckpointsWeights) {
  const spec::TrainingJobSpec spec = SmallJob(4, 2);
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trained(spec, *comm, torch::kCPU);
  Checkpointer checkpointer(dir_.string(), spec, *comm, 0, trained);
  ASSERT_EQ(checkpointer.Resume(), 0);
  for (int64_t done = 1; done <= 2; ++done) {
    trained.RunStep(done - 1);
    checkpointer.AfterStep(done);
  }
  spec::TrainingJobSpec warm = spec;
  warm.model.init = "checkpoint";
  warm.task.seed += 1;  // another initial draw: only the loaded weights can make them equal
  for (const fs::path& from : {dir_, dir_ / StepDirName(2)}) {
    warm.model.init_checkpoint = from.string();
    GrpoTrainer started(warm, *comm, torch::kCPU);
    const auto want = trained.model()->OrderedParameters(), got = started.model()->OrderedParameters();
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(torch::equal(want[i].second, got[i].second)) << from << ": " << want[i].first;
    }
  }
  warm.model.init_checkpoint = (dir_ / StepDirName(99)).string();
  try {
    GrpoTrainer refused(warm, *comm, torch::kCPU);
    FAIL() << "started from a step that does not exist";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("step-000099"), std::string::npos) << e.what();
  }
}

// The checkpoint names the directory the model source loaded the model from (so that
// `headroom export` finds it): for a hub reference, its snapshot in the cache.
TEST_F(TrainComponentsTest, CheckpointRecordsTheDirectoryTheModelWasLoadedFrom) {
  const fs::path snapshot = dir_ / "hub" / "models--org--tiny" / "snapshots" / std::string(40, 'b');
  fs::create_directories(snapshot.parent_path());
  fs::create_directories(snapshot.parent_path().parent_path() / "refs");
  fs::copy(headroom::testing::ExampleTextModel(), snapshot);
  std::ofstream(snapshot.parent_path().parent_path() / "refs" / "main") << std::string(40, 'b');
  spec::TrainingJobSpec spec = SmallJob(1, 1);
  spec.model.preset.clear();
  spec.model.hub.repo = "org/tiny";
  spec.model.hub.revision = "main";
  headroom::testing::UseExampleTextTask(spec);
  spec.grpo.max_prompt_length = 64;
  spec.grpo.max_response_length = 4;
  ::setenv("HF_HUB_CACHE", (dir_ / "hub").c_str(), 1);
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(spec, *comm, torch::kCPU);
  ::unsetenv("HF_HUB_CACHE");
  Checkpointer checkpointer((dir_ / "ckpt").string(), spec, *comm, 0, trainer);
  ASSERT_EQ(checkpointer.Resume(), 0);
  ASSERT_TRUE(checkpointer.Save(1));
  const auto reader = CheckpointReader::OpenLatest(dir_ / "ckpt");
  ASSERT_TRUE(reader.has_value());
  EXPECT_EQ(reader->manifest().extra.value("model_path", ""), snapshot.string());
}

TEST_F(TrainComponentsTest, NoDirectoryNoCheckpoints) {
  const spec::TrainingJobSpec spec = SmallJob(4, 1);
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(spec, *comm, torch::kCPU);
  Checkpointer none("", spec, *comm, 0, trainer);
  EXPECT_EQ(none.Resume(), 0);
  EXPECT_TRUE(none.ShouldSave(1));
  EXPECT_FALSE(none.AfterStep(1));
  EXPECT_FALSE(none.Save(2));
}

TEST_F(TrainComponentsTest, TelemetryMeasuresTheStepAndPublishesItsRecordAsALogLine) {
  const spec::TrainingJobSpec spec = SmallJob(2, 0);
  auto comm = MakeLocalCommunicator();
  GrpoTrainer trainer(spec, *comm, torch::kCPU);
  fs::create_directories(dir_);
  StepTelemetryOptions options;
  options.job_name = "components";
  options.rank = 0;
  options.world_size = 1;
  options.micro_batch_size = spec.grpo.micro_batch_size;
  options.host_limit_bytes = spec.resources.memory_bytes;
  options.log_path = (dir_ / "steps.jsonl").string();
  StepTelemetry telemetry(options, torch::kCPU);
  telemetry.BeginStep();
  StepReport report;
  report.training = trainer.RunStep(0);
  report.measured = telemetry.EndStep();
  report.next_step_tokens = 99;
  EXPECT_EQ(report.measured.micro_batch_size, spec.grpo.micro_batch_size);
  EXPECT_GT(report.measured.memory.host_bytes, 0);
  EXPECT_GE(report.measured.memory.host_peak_bytes, report.measured.memory.host_bytes);
  EXPECT_GT(report.measured.memory.host_limit_bytes, 0);
  EXPECT_GT(report.measured.seconds, 0);
  const protocol::StepRecord record = AssembleStepRecord(report);
  EXPECT_EQ(record.step, 1) << "records count finished steps";
  EXPECT_EQ(record.tokens, report.training.tokens);
  EXPECT_EQ(record.loss, report.training.loss);
  telemetry.Publish(record);
  std::ifstream in(dir_ / "steps.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const std::optional<protocol::StepRecord> back = protocol::ParseStepLogLine(line);
  ASSERT_TRUE(back) << line;
  EXPECT_EQ(back->ToJson(), record.ToJson());
}

}  // namespace
}  // namespace headroom::worker
