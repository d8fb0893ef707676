// Workers as local processes, each in its own memory cgroup (`headroom run`): the
// WorkerBackend the local runtime drives (operator/runtime/worker_backend.h).
//
// Per generation g, under the work directory:
//   gen-000g/job.yaml             the spec this generation runs (--job points here)
//   gen-000g/rank-R.log           the rank's step log (--log), tailed for StepRecords and
//                                 model-fetch records
//   gen-000g/rank-R.out           its stdout and stderr
//   gen-000g/rank-R.termination   HEADROOM_TERMINATION_LOG (core/protocol/termination_message.h)
//   checkpoints/                  --checkpoint-dir, shared by every generation
// Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT (a free
// loopback port, fresh per generation), HEADROOM_TERMINATION_LOG,
// HEADROOM_MEMORY_LIMIT_BYTES (spec.resources.memory: the limit the worker guards when no
// cgroup limit is visible to it), HEADROOM_GUARD_HISTORY, and --metrics-port 0; then the
// plain env values of spec.template (local/local_pod_template.h: what else the
// template holds is named once through `notice` as ignored).
//
// Ranks per pod: with spec.ranksPerPod = K > 1 the ranks run as pods do on Kubernetes,
// K to a pod: one `WORKER launch` process per pod (core/launch/pod_launcher.h) in one
// cgroup limited to K times spec.resources.memory, its ranks' step logs still
// rank-R.log, its output and termination message those of its first rank. Without cgroups
// the soft limit is the pod's too: the launcher's and its ranks' resident sets together.
//
// Memory limits: each rank runs in a memory cgroup (core/memory/cgroup.h) limited to
// spec.resources.memory, so the kernel's OOM killer judges it as it would a pod. Where no
// cgroup can be created (not root, no writable memory hierarchy) the backend says so once
// through `notice` and falls back to a soft limit: the workers' guard uses
// HEADROOM_MEMORY_LIMIT_BYTES, and the backend itself kills a rank whose resident set
// crosses the limit (reported as OOMKilled, reason "SoftLimitExceeded") — what the
// kernel would have done.
//
// Processes: fork+exec; each child gets its own process group (a terminal's Ctrl-C reaches
// only `headroom`, which drains the workers itself) and PR_SET_PDEATHSIG=SIGKILL (workers
// never outlive a killed supervisor). The child joins its cgroup before exec, and starts
// with SIGTERM and SIGINT blocked (launch::BecomeSupervisedWorker) until the worker
// installs its handler: a drain sent while it loads is held, never fatal.
// An exit by SIGKILL while the cgroup's oom_kill counter moved is OOMKilled.
//
// Contract: the destructor kills any live rank, reaps it and removes every cgroup this
// backend created, whatever happened before (exceptions, Ctrl-C). Not thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/non_copyable.h"
#include "core/memory/cgroup.h"
#include "operator/runtime/worker_backend.h"

namespace headroom::local {

struct LocalBackendOptions {
  std::string workdir;        // created if missing
  std::string worker_binary;  // headroom-worker (or a test double)
  enum class Cgroups { kAuto, kRequire, kOff } cgroups = Cgroups::kAuto;
  std::string cgroup_root = "/";                               // prefix of /sys/fs/cgroup (tests)
  std::vector<std::pair<std::string, std::string>> extra_env;  // added to every rank
  std::function<void(const std::string&)> notice;              // one-off messages for the user
};

class LocalProcessBackend : public runtime::WorkerBackend, NonCopyable {
 public:
  explicit LocalProcessBackend(LocalBackendOptions options);
  ~LocalProcessBackend() override;

  void Launch(const runtime::LaunchRequest& request) override;
  runtime::Observation Observe() override;
  void Drain(std::chrono::milliseconds grace) override;
  void Kill() override;

  bool using_cgroups() const { return use_cgroups_; }
  std::string checkpoint_dir() const { return options_.workdir + "/checkpoints"; }
  std::string generation_dir(int generation) const;
  // Pids of the live ranks (tests).
  std::vector<pid_t> live_pids() const;

 private:
  struct Rank {
    int rank = 0;
    pid_t pid = -1;
    std::string log_path, termination_path, out_path;
    std::optional<memory::MemoryCgroup> cgroup;
    int64_t oom_kills_at_start = 0;
    off_t log_offset = 0;
    std::string partial_line;
    bool soft_limit_killed = false;
    std::optional<runtime::RankExit> exit;
    // In a pod of several ranks, the index in ranks_ of the pod's first rank, whose
    // process (the launcher), cgroup and termination message are the pod's; this rank
    // has none of its own (pid -1) and ends as the pod does. -1 for that first rank.
    int pod_leader = -1;
    int pod_ranks = 1;  // the ranks this process stands for: a pod's launcher, all of them
  };

  // Launch's steps. StartGeneration: checks nothing runs, forgets the last generation,
  // writes this one's job.yaml and returns its path. SharedEnvironment: what every rank
  // of it gets. StartRank: forks one rank (in its cgroup, when there are cgroups) and adds
  // it to ranks_, also when it fails after the fork (so the caller can kill it).
  std::string StartGeneration(const runtime::LaunchRequest& request);
  std::vector<std::string> SharedEnvironment(const runtime::LaunchRequest& request, int port);
  void StartRank(const spec::TrainingJob& job, int rank, const std::string& job_path,
                 const std::vector<std::string>& shared_env);
  // A pod of spec.ranksPerPod ranks from `first_rank`: one launcher (core/launch/
  // pod_launcher.h) in one cgroup of ranksPerPod times the rank's limit.
  void StartPod(const spec::TrainingJob& job, int first_rank, const std::string& job_path,
                const std::vector<std::string>& shared_env);
  void CreateCgroup(const spec::TrainingJob& job, Rank& r, int64_t limit_bytes);
  // The rank's new step-log lines: step records into obs.new_steps, model-fetch records
  // into obs.model_fetch.
  void TailLog(Rank& r, runtime::Observation& obs);
  void ReapAll();
  void DestroyCgroups();
  void Notice(const std::string& message);

  LocalBackendOptions options_;
  bool use_cgroups_ = false;
  bool stale_cgroups_swept_ = false;  // RemoveStaleCgroups runs once, at the first cgroup
  int generation_ = 0;
  int64_t limit_bytes_ = 0;
  std::vector<Rank> ranks_;
  std::optional<std::chrono::steady_clock::time_point> kill_after_;
  bool template_noticed_ = false;  // what spec.template ignores here is said once per run
};

}  // namespace headroom::local
