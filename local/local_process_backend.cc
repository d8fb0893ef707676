#include "local/local_process_backend.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/checkpoint/checkpoint_layout.h"
#include "core/launch/child_process.h"
#include "core/net/free_port.h"
#include "core/protocol/environment.h"
#include "local/local_pod_template.h"
#include "core/protocol/exit_codes.h"
#include "core/protocol/termination_message.h"
#include "core/spec/training_job.h"
#include "local/stale_cgroups.h"

namespace headroom::local {

namespace fs = std::filesystem;
using runtime::RankExit;

namespace {

// The end of a file (at most its last 64 KiB: a LibTorch error's stack trace alone can
// take several KiB after the line that matters).
std::string Tail(const std::string& path) {
  std::ifstream in(path, std::ios::ate);
  const std::streamoff size = in.tellg();
  if (size <= 0) return "";
  const std::streamoff from = std::max<std::streamoff>(0, size - (64 << 10));
  in.seekg(from);
  std::string tail(static_cast<size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  return tail;
}

int64_t ResidentBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
    in.ignore(1 << 12, '\n');
  }
  return 0;
}

// A process's resident set with its children's: a pod's launcher and its ranks.
int64_t PodResidentBytes(pid_t pid) {
  int64_t bytes = ResidentBytes(pid);
  std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  for (pid_t child; children >> child;) bytes += ResidentBytes(child);
  return bytes;
}

}  // namespace

LocalProcessBackend::LocalProcessBackend(LocalBackendOptions options) : options_(std::move(options)) {
  fs::create_directories(options_.workdir);
  fs::create_directories(checkpoint_dir());
  if (options_.cgroups != LocalBackendOptions::Cgroups::kOff) {
    const std::string why = memory::MemoryCgroup::UnsupportedReason(options_.cgroup_root);
    use_cgroups_ = why.empty();
    if (!use_cgroups_) {
      if (options_.cgroups == LocalBackendOptions::Cgroups::kRequire) {
        throw std::runtime_error("memory cgroups required but unavailable: " + why);
      }
      Notice("no memory cgroup can be created here (" + why +
             "); the memory limit is a soft limit: the workers' guard uses " + protocol::kMemoryLimitEnv +
             " and headroom kills a worker whose resident set crosses it");
    }
  }
}

LocalProcessBackend::~LocalProcessBackend() {
  for (Rank& r : ranks_) {
    if (!r.exit && r.pid > 0) kill(r.pid, SIGKILL);
  }
  ReapAll();
  DestroyCgroups();
}

void LocalProcessBackend::Notice(const std::string& message) {
  if (options_.notice) options_.notice(message);
}

std::string LocalProcessBackend::generation_dir(int generation) const {
  char name[32];
  std::snprintf(name, sizeof name, "gen-%04d", generation);
  return options_.workdir + "/" + name;
}

std::vector<pid_t> LocalProcessBackend::live_pids() const {
  std::vector<pid_t> pids;
  for (const Rank& r : ranks_) {
    if (!r.exit && r.pid > 0) pids.push_back(r.pid);
  }
  return pids;
}

void LocalProcessBackend::ReapAll() {
  for (Rank& r : ranks_) {
    if (r.exit) continue;
    if (r.pid <= 0) {  // a pod's other rank: ended with its launcher
      r.exit = RankExit{protocol::kExitKilled, false, "Killed", "", ""};
      continue;
    }
    int status = 0;
    while (waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.exit = RankExit{protocol::kExitKilled, false, "Killed", "", ""};
  }
}

void LocalProcessBackend::DestroyCgroups() {
  for (Rank& r : ranks_) {
    if (!r.cgroup) continue;
    // The kernel frees a cgroup a moment after its last process is reaped.
    for (int i = 0; i < 50 && !r.cgroup->Destroy(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    r.cgroup.reset();
  }
}

namespace {

std::string Var(const char* name, const std::string& value) { return std::string(name) + "=" + value; }

// This process's environment without the variables the launcher sets itself (the
// protocol's and the template's): those are added after, so they replace ours.
std::vector<std::string> InheritedEnvironment(const LocalPodTemplate& from_template) {
  std::vector<std::string> ours{protocol::kRankEnv,        protocol::kLocalRankEnv,   protocol::kWorldSizeEnv,
                                protocol::kMasterAddrEnv,  protocol::kMasterPortEnv,  protocol::kTerminationLogEnv,
                                protocol::kMemoryLimitEnv, protocol::kGuardHistoryEnv};
  for (const auto& [name, value] : from_template.env) ours.push_back(name);
  return launch::EnvironmentWithout(ours);
}

// A forked child held before exec until the parent writes to `gate` (so the parent can
// put it in its cgroup first); closing `gate` without a byte makes it exit 127.
struct HeldChild {
  pid_t pid;
  int gate;
};

// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void ExecWhenReleased(pid_t parent, int out_fd, const int gate[2], const launch::ExecImage& image) {
  launch::BecomeSupervisedWorker(parent);
  dup2(out_fd, STDOUT_FILENO);
  dup2(out_fd, STDERR_FILENO);
  close(gate[1]);
  char go = 0;
  // Wait until the parent has put us in the cgroup: no byte = the parent gave up.
  if (read(gate[0], &go, 1) != 1) _exit(127);
  image.ExecOrExit("headroom: cannot exec the worker binary\n");
}

// Forks `args` (with exactly `env`), its stdout and stderr to `out_path`, held before exec.
HeldChild ForkHeld(std::vector<std::string> args, std::vector<std::string> env, const std::string& out_path) {
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  const launch::ExecImage image(std::move(args), std::move(env));
  const int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0) throw std::runtime_error("cannot open " + out_path + ": " + std::strerror(errno));
  int gate[2];
  if (pipe2(gate, O_CLOEXEC) != 0) {
    close(out_fd);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = getpid();
  pid_t pid;
  {
    const launch::StopSignalsBlocked held;  // the child is born with them blocked
    pid = fork();
    if (pid == 0) ExecWhenReleased(parent, out_fd, gate, image);
  }
  if (pid < 0) {
    close(out_fd);
    close(gate[0]);
    close(gate[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  close(out_fd);
  close(gate[0]);
  return {pid, gate[1]};
}

void Release(const HeldChild& child) {
  const char go = 1;
  (void)!write(child.gate, &go, 1);
  close(child.gate);
}

}  // namespace

void LocalProcessBackend::Launch(const runtime::LaunchRequest& request) {
  const std::string job_path = StartGeneration(request);
  const spec::TrainingJob& job = request.job;
  const std::vector<std::string> shared_env = SharedEnvironment(request, net::FreePort());
  try {
    if (job.spec.ranks_per_pod > 1) {
      for (int first = 0; first < job.spec.workers; first += job.spec.ranks_per_pod) {
        StartPod(job, first, job_path, shared_env);
      }
    } else {
      for (int rank = 0; rank < job.spec.workers; ++rank) StartRank(job, rank, job_path, shared_env);
    }
  } catch (...) {
    for (Rank& r : ranks_) {
      if (r.pid > 0) kill(r.pid, SIGKILL);
    }
    ReapAll();
    DestroyCgroups();
    throw;
  }
}

std::string LocalProcessBackend::StartGeneration(const runtime::LaunchRequest& request) {
  for (const Rank& r : ranks_) {
    if (!r.exit) throw std::logic_error("Launch while generation " + std::to_string(generation_) + " runs");
  }
  DestroyCgroups();
  ranks_.clear();
  kill_after_.reset();
  if (access(options_.worker_binary.c_str(), X_OK) != 0) {
    throw std::runtime_error("worker binary " + options_.worker_binary + " is not an executable file");
  }
  generation_ = request.generation;
  limit_bytes_ = request.job.spec.resources.memory_bytes;
  const std::string dir = generation_dir(generation_);
  fs::create_directories(dir);
  const std::string job_path = dir + "/job.yaml";
  std::ofstream out(job_path, std::ios::trunc);
  out << spec::ToYaml(request.job);
  if (!out) throw std::runtime_error("cannot write " + job_path);
  return job_path;
}

std::vector<std::string> LocalProcessBackend::SharedEnvironment(const runtime::LaunchRequest& request, int port) {
  const LocalPodTemplate from_template = ApplicableOnOneMachine(request.job.spec.pod_template);
  if (!template_noticed_) {
    template_noticed_ = true;
    if (std::string notice = IgnoredTemplateNotice(from_template); !notice.empty()) Notice(notice);
  }
  std::vector<std::string> env = InheritedEnvironment(from_template);
  env.push_back(Var(protocol::kWorldSizeEnv, std::to_string(request.job.spec.workers)));
  env.push_back(Var(protocol::kMasterAddrEnv, "127.0.0.1"));
  env.push_back(Var(protocol::kMasterPortEnv, std::to_string(port)));
  env.push_back(Var(protocol::kMemoryLimitEnv, std::to_string(limit_bytes_)));
  if (!request.guard_history_json.empty()) env.push_back(Var(protocol::kGuardHistoryEnv, request.guard_history_json));
  for (const auto& [name, value] : from_template.env) env.push_back(name + "=" + value);
  for (const auto& [k, v] : options_.extra_env) env.push_back(k + "=" + v);
  return env;
}

void LocalProcessBackend::StartRank(const spec::TrainingJob& job, int rank, const std::string& job_path,
                                    const std::vector<std::string>& shared_env) {
  Rank r;
  r.rank = rank;
  const std::string dir = generation_dir(generation_);
  r.log_path = dir + "/rank-" + std::to_string(rank) + ".log";
  r.termination_path = dir + "/rank-" + std::to_string(rank) + ".termination";
  r.out_path = dir + "/rank-" + std::to_string(rank) + ".out";
  fs::remove(r.log_path);
  fs::remove(r.termination_path);
  if (use_cgroups_) CreateCgroup(job, r, limit_bytes_);
  std::vector<std::string> env = shared_env;
  env.push_back(Var(protocol::kRankEnv, std::to_string(rank)));
  env.push_back(Var(protocol::kLocalRankEnv, std::to_string(rank)));
  env.push_back(Var(protocol::kTerminationLogEnv, r.termination_path));
  const HeldChild child = ForkHeld({options_.worker_binary, "--job", job_path, "--checkpoint-dir", checkpoint_dir(),
                                    "--metrics-port", "0", "--log", r.log_path},
                                   std::move(env), r.out_path);
  r.pid = child.pid;
  try {
    if (r.cgroup) r.cgroup->AddProcess(child.pid);
  } catch (...) {
    close(child.gate);
    ranks_.push_back(std::move(r));
    throw;
  }
  Release(child);
  ranks_.push_back(std::move(r));
}

void LocalProcessBackend::StartPod(const spec::TrainingJob& job, int first_rank, const std::string& job_path,
                                   const std::vector<std::string>& shared_env) {
  const int k = job.spec.ranks_per_pod;
  const std::string dir = generation_dir(generation_);
  const size_t leader = ranks_.size();
  for (int rank = first_rank; rank < first_rank + k; ++rank) {
    Rank r;
    r.rank = rank;
    r.log_path = dir + "/rank-" + std::to_string(rank) + ".log";
    r.termination_path = dir + "/rank-" + std::to_string(first_rank) + ".termination";
    r.out_path = dir + "/rank-" + std::to_string(first_rank) + ".out";
    r.pod_leader = rank == first_rank ? -1 : static_cast<int>(leader);
    fs::remove(r.log_path);
    ranks_.push_back(std::move(r));
  }
  Rank& pod = ranks_[leader];
  pod.pod_ranks = k;
  fs::remove(pod.termination_path);
  if (use_cgroups_) CreateCgroup(job, pod, limit_bytes_ * k);
  std::vector<std::string> env = shared_env;
  env.push_back(Var(protocol::kRankEnv, std::to_string(first_rank)));
  env.push_back(Var(protocol::kLocalRankEnv, "0"));
  env.push_back(Var(protocol::kTerminationLogEnv, pod.termination_path));
  const HeldChild child = ForkHeld({options_.worker_binary, "launch", "--ranks-per-pod", std::to_string(k),
                                    "--first-rank", std::to_string(first_rank), "--metrics-port", "0", "--", "--job",
                                    job_path, "--checkpoint-dir", checkpoint_dir(), "--log", dir + "/rank-{rank}.log"},
                                   std::move(env), pod.out_path);
  pod.pid = child.pid;
  try {
    if (pod.cgroup) pod.cgroup->AddProcess(child.pid);
  } catch (...) {
    close(child.gate);
    throw;
  }
  Release(child);
}

void LocalProcessBackend::CreateCgroup(const spec::TrainingJob& job, Rank& r, int64_t limit_bytes) {
  r.cgroup = memory::MemoryCgroup::Create("headroom-" + job.metadata.name + "-" + std::to_string(getpid()) + "-g" +
                                              std::to_string(generation_) + "-r" + std::to_string(r.rank),
                                          limit_bytes, options_.cgroup_root);
  r.oom_kills_at_start = r.cgroup->OomKillCount();
  if (!stale_cgroups_swept_) {
    stale_cgroups_swept_ = true;
    const int swept = RemoveStaleCgroups(fs::path(r.cgroup->dir()).parent_path().string());
    if (swept > 0) Notice("removed " + std::to_string(swept) + " empty memory cgroup(s) of killed runs");
  }
}

void LocalProcessBackend::TailLog(Rank& r, runtime::Observation& obs) {
  const int fd = open(r.log_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = pread(fd, buf, sizeof buf, r.log_offset);
    if (n <= 0) break;
    r.log_offset += n;
    r.partial_line.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  size_t start = 0;
  for (size_t nl; (nl = r.partial_line.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string line = r.partial_line.substr(start, nl - start);
    if (std::optional<protocol::ModelFetchRecord> fetch = protocol::ParseModelFetchLine(line)) {
      fetch->rank = r.rank;
      fetch->generation = generation_;
      obs.model_fetch = *fetch;
      continue;
    }
    std::optional<protocol::StepRecord> rec = protocol::ParseStepLogLine(line);
    if (!rec) continue;  // not a step line (the worker may log other JSON)
    rec->rank = r.rank;
    rec->generation = generation_;
    obs.new_steps.push_back(*rec);
  }
  r.partial_line.erase(0, start);
}

runtime::Observation LocalProcessBackend::Observe() {
  runtime::Observation obs;
  obs.generation = generation_;
  obs.now = std::chrono::steady_clock::now();
  const bool kill_now = kill_after_ && obs.now >= *kill_after_;
  for (Rank& r : ranks_) {
    if (!r.exit && r.pod_leader >= 0) {
      // A pod's other rank ends with its launcher, which stopped them together.
      if (const auto& pod = ranks_[r.pod_leader].exit) r.exit = runtime::PodPeerExit(*pod);
    } else if (!r.exit) {
      int status = 0;
      const pid_t done = waitpid(r.pid, &status, WNOHANG);
      if (done == r.pid) {
        RankExit e;
        if (WIFEXITED(status)) {
          e.exit_code = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
          e.exit_code = 128 + WTERMSIG(status);
          if (WTERMSIG(status) == SIGKILL) {
            e.oom_killed = r.soft_limit_killed || (r.cgroup && r.cgroup->OomKillCount() > r.oom_kills_at_start);
          }
        }
        e.reason = r.soft_limit_killed ? "SoftLimitExceeded" : protocol::ExitReason(e.exit_code, e.oom_killed);
        e.termination_message = protocol::ReadTerminationFile(r.termination_path);
        e.last_output = protocol::CrashReasonLine(Tail(r.out_path));
        r.exit = e;
      } else if (kill_now) {
        kill(r.pid, SIGKILL);
      } else if (!use_cgroups_ && limit_bytes_ > 0 && PodResidentBytes(r.pid) > limit_bytes_ * r.pod_ranks) {
        // The soft limit: do what the kernel would have done at a cgroup limit.
        r.soft_limit_killed = true;
        kill(r.pid, SIGKILL);
      }
    }
    TailLog(r, obs);
    runtime::RankObservation ro;
    ro.rank = r.rank;
    ro.running = !r.exit;
    ro.exit = r.exit;
    obs.ranks.push_back(ro);
  }
  // This backend sees the checkpoint directory itself: no complete step there is step 0
  // (a crash before the first save lost every step it reached), not "cannot tell".
  obs.checkpoint_step = checkpoint::LatestCheckpointStep(checkpoint_dir()).value_or(0);
  bool all_done = !ranks_.empty();
  for (const Rank& r : ranks_) all_done = all_done && r.exit;
  if (all_done) DestroyCgroups();
  return obs;
}

void LocalProcessBackend::Drain(std::chrono::milliseconds grace) {
  for (Rank& r : ranks_) {
    if (!r.exit && r.pid > 0) kill(r.pid, SIGTERM);
  }
  kill_after_ = std::chrono::steady_clock::now() + grace;
}

void LocalProcessBackend::Kill() {
  for (Rank& r : ranks_) {
    if (!r.exit && r.pid > 0) kill(r.pid, SIGKILL);
  }
}

}  // namespace headroom::local
