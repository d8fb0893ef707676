// DriveJob carries out what the reconciler decides, on a backend that records what it was
// asked to do: launches are observed again at once, a drain or a kill ends the call, a
// launch that throws fails the job with the backend's reason.
#include "operator/runtime/job_driver.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/protocol/exit_codes.h"
#include "tests/operator/runtime_test_support.h"

namespace headroom::runtime {
namespace {

using Kind = NextStep::Kind;
using testing::Exit;
using testing::MakeJob;
using testing::Options;

// Drains get a grace the tests can recognise.
ReconcilerOptions DriveOptionsWithGrace() {
  ReconcilerOptions o = Options();
  o.drain_grace = std::chrono::milliseconds(1234);
  return o;
}

// Runs every launched rank until a test ends it; records every call.
class RecordingBackend : public WorkerBackend {
 public:
  void Launch(const LaunchRequest& request) override {
    calls.push_back("launch " + std::to_string(request.generation));
    if (!launch_error.empty()) throw std::runtime_error(launch_error);
    generation_ = request.generation;
    ranks_.assign(request.job.spec.workers, RankObservation{});
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ranks_[r].rank = static_cast<int>(r);
      ranks_[r].running = true;
    }
  }
  Observation Observe() override {
    calls.push_back("observe");
    Observation o;
    o.generation = generation_;
    o.ranks = ranks_;
    return o;
  }
  void Drain(std::chrono::milliseconds grace) override { calls.push_back("drain " + std::to_string(grace.count())); }
  void Kill() override { calls.push_back("kill"); }

  void End(int rank, int exit_code) {
    ranks_[rank].running = false;
    ranks_[rank].exit = Exit(exit_code);
  }

  std::vector<std::string> calls;
  std::string launch_error;

 private:
  int generation_ = 0;
  std::vector<RankObservation> ranks_;
};

TEST(DriveJob, ALaunchIsObservedAgainAtOnce) {
  JobReconciler rec(MakeJob(2), DriveOptionsWithGrace());
  RecordingBackend backend;
  std::vector<Kind> seen;
  DriveOptions options;
  options.on_step = [&](const Observation&, const NextStep& next) { seen.push_back(next.kind); };
  EXPECT_EQ(DriveJob(rec, backend, options).kind, Kind::kWait);
  EXPECT_EQ(backend.calls, (std::vector<std::string>{"observe", "launch 1", "observe"}));
  EXPECT_EQ(seen, (std::vector<Kind>{Kind::kLaunch, Kind::kWait}));
  EXPECT_EQ(rec.status().generation, 1);
}

TEST(DriveJob, ALaunchThatThrowsFailsTheJobWithTheReason) {
  JobReconciler rec(MakeJob(1), DriveOptionsWithGrace());
  RecordingBackend backend;
  backend.launch_error = "no such binary: headroom-worker";
  EXPECT_EQ(DriveJob(rec, backend).kind, Kind::kFinished);
  EXPECT_EQ(rec.status().phase, JobPhase::kFailed);
  EXPECT_EQ(rec.status().message, "could not start generation 1: no such binary: headroom-worker");
  EXPECT_EQ(DriveJob(rec, backend).kind, Kind::kFinished) << "a finished job stays finished";
}

TEST(DriveJob, AStopRequestDrainsWithTheGraceAndEndsTheCall) {
  JobReconciler rec(MakeJob(2), DriveOptionsWithGrace());
  RecordingBackend backend;
  DriveJob(rec, backend);
  rec.RequestStop("user asked");
  backend.calls.clear();
  EXPECT_EQ(DriveJob(rec, backend).kind, Kind::kDrain);
  EXPECT_EQ(backend.calls, (std::vector<std::string>{"observe", "drain 1234"}));
  // The ranks drain (exit 75): the job ends Suspended.
  backend.End(0, protocol::kExitDrained);
  backend.End(1, protocol::kExitDrained);
  EXPECT_EQ(DriveJob(rec, backend).kind, Kind::kFinished);
  EXPECT_EQ(rec.status().phase, JobPhase::kSuspended);
}

TEST(DriveJob, ACrashedRankGetsItsPeersKilledThenTheJobRelaunches) {
  JobReconciler rec(MakeJob(2), DriveOptionsWithGrace());
  RecordingBackend backend;
  DriveJob(rec, backend);
  backend.End(1, protocol::kExitFailure);
  backend.calls.clear();
  EXPECT_EQ(DriveJob(rec, backend).kind, Kind::kKill);
  EXPECT_EQ(backend.calls, (std::vector<std::string>{"observe", "kill"}));
  backend.End(0, protocol::kExitKilled);
  backend.calls.clear();
  EXPECT_EQ(DriveJob(rec, backend).kind, Kind::kWait);
  EXPECT_EQ(backend.calls, (std::vector<std::string>{"observe", "launch 2", "observe"}));
  EXPECT_EQ(rec.status().restarts, 1);
}

TEST(DriveJob, RoundsAreBounded) {
  JobReconciler rec(MakeJob(1), DriveOptionsWithGrace());
  RecordingBackend backend;
  DriveOptions options;
  options.max_rounds = 1;
  EXPECT_EQ(DriveJob(rec, backend, options).kind, Kind::kLaunch);
  EXPECT_EQ(backend.calls, (std::vector<std::string>{"observe", "launch 1"}));
}

}  // namespace
}  // namespace headroom::runtime
