#include "core/launch/pod_launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "core/launch/child_process.h"
#include "core/metrics/metrics_http_server.h"
#include "core/net/http_get.h"
#include "core/protocol/environment.h"
#include "core/protocol/exit_codes.h"
#include "core/protocol/stop_signals.h"
#include "core/protocol/termination_message.h"

namespace headroom::launch {

namespace {

using Clock = std::chrono::steady_clock;

// The ranks' pids, for the signal handler (async-signal-safe: it only reads these and
// calls kill).
constexpr int kMaxRanks = 1024;
std::atomic<pid_t> g_pids[kMaxRanks];
std::atomic<int> g_count{0};

void ForwardStopSignal(int signal_number) {
  const int n = g_count.load();
  for (int i = 0; i < n; ++i) {
    const pid_t pid = g_pids[i].load();
    if (pid > 0) kill(pid, signal_number);
  }
}

bool ParseInt(const char* text, int& out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < -(1L << 30) || v > (1L << 30)) return false;
  out = static_cast<int>(v);
  return true;
}

// How a rank ended: its exit code, or 128 + the signal that killed it.
struct End {
  int code = 0;
  int signal = 0;  // > 0 when killed by a signal
};

bool Orderly(const End& e) { return e.signal == 0 && protocol::IsOrderlyExit(e.code); }

// A rank's plain failure (exit 1) right after a peer's end is most often that end seen
// from the other side (a collective's peer gone): a kill, a refusal, a GPU out-of-memory
// or a guard stop that ends within the settle window replaces it as the pod's reason.
constexpr auto kSettle = std::chrono::milliseconds(500);

std::vector<std::string> RankEnvironment(int rank, int local_rank, const std::string& termination_path) {
  std::vector<std::string> env =
      EnvironmentWithout({protocol::kRankEnv, protocol::kLocalRankEnv, protocol::kTerminationLogEnv});
  env.push_back(std::string(protocol::kRankEnv) + "=" + std::to_string(rank));
  env.push_back(std::string(protocol::kLocalRankEnv) + "=" + std::to_string(local_rank));
  env.push_back(std::string(protocol::kTerminationLogEnv) + "=" + termination_path);
  return env;
}

// Forks one rank (args[0]: its program).
pid_t StartRank(std::vector<std::string> args, std::vector<std::string> env) {
  const ExecImage image(std::move(args), std::move(env));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  BecomeSupervisedWorker(parent);
  image.ExecOrExit("headroom launch: cannot exec the rank's program\n");
}

class RankMetrics {
 public:
  RankMetrics(int port, int ranks) : server_("0.0.0.0", port), port_(port), ranks_(ranks) {
    server_.Handle("/metrics", [this] {
      std::vector<std::string> bodies;
      for (int l = 0; l < ranks_; ++l) {
        if (auto body = net::HttpGet("127.0.0.1", port_ + 1 + l, "/metrics", std::chrono::seconds(2))) {
          bodies.push_back(std::move(*body));
        }
      }
      return metrics::HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", MergeExpositions(bodies)};
    });
    server_.Handle("/healthz", [this] {
      for (int l = 0; l < ranks_; ++l) {
        if (!net::HttpGet("127.0.0.1", port_ + 1 + l, "/healthz", std::chrono::seconds(2))) {
          return metrics::HttpResponse{503, "text/plain; charset=utf-8",
                                       "rank " + std::to_string(l) + " not serving\n"};
        }
      }
      return metrics::HttpResponse{200, "text/plain; charset=utf-8", "headroom_worker_up 1\n"};
    });
    server_.Start();
  }

 private:
  metrics::MetricsHttpServer server_;
  int port_;
  int ranks_;
};

[[noreturn]] void ExitLike(const End& e) {
  if (e.signal > 0) {
    signal(e.signal, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, e.signal);
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    kill(getpid(), e.signal);
    // Still here: PID 1 of a container ignores its own signals.
  }
  std::exit(e.code);
}

}  // namespace

bool ParseLaunchArguments(int argc, char** argv, LaunchOptions& o, std::ostream& err) {
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    auto value = [&](int& out) {
      if (i + 1 >= argc || !ParseInt(argv[i + 1], out)) {
        err << "headroom-worker launch: " << a << " needs an integer\n";
        return false;
      }
      ++i;
      return true;
    };
    int seconds = 0;
    if (a == "--ranks-per-pod") {
      if (!value(o.ranks_per_pod)) return false;
    } else if (a == "--first-rank") {
      if (!value(o.first_rank)) return false;
    } else if (a == "--metrics-port") {
      if (!value(o.metrics_port)) return false;
    } else if (a == "--stop-grace-seconds") {
      if (!value(seconds)) return false;
      o.stop_grace = std::chrono::seconds(seconds);
    } else if (a == "--worker") {
      if (i + 1 >= argc) {
        err << "headroom-worker launch: --worker needs a path\n";
        return false;
      }
      o.worker = argv[++i];
    } else {
      err << "headroom-worker launch: unknown option " << a
          << " (usage: launch --ranks-per-pod K --first-rank R [--metrics-port P] [--worker PATH] "
             "[--stop-grace-seconds S] -- WORKER_ARGS...)\n";
      return false;
    }
  }
  for (; i < argc; ++i) o.worker_args.emplace_back(argv[i]);
  if (o.ranks_per_pod < 1 || o.ranks_per_pod > kMaxRanks) {
    err << "headroom-worker launch: --ranks-per-pod must be in [1, " << kMaxRanks << "], got " << o.ranks_per_pod
        << "\n";
    return false;
  }
  if (o.first_rank < 0) {
    err << "headroom-worker launch: --first-rank must be >= 0, got " << o.first_rank << "\n";
    return false;
  }
  if (o.metrics_port > 0 && o.metrics_port + o.ranks_per_pod > 65535) {
    err << "headroom-worker launch: --metrics-port " << o.metrics_port << " leaves no ports for " << o.ranks_per_pod
        << " ranks above it\n";
    return false;
  }
  return true;
}

int RunPodLauncher(const LaunchOptions& o) {
  const std::string program = o.worker.empty() ? std::filesystem::read_symlink("/proc/self/exe").string() : o.worker;
  auto fail = [](const std::string& reason) {
    std::cerr << reason << "\n";
    protocol::WriteTerminationMessage(protocol::WorkerErrorMessage(reason));
    return protocol::kExitFailure;
  };
  if (access(program.c_str(), X_OK) != 0) return fail("headroom launch: " + program + " is not an executable file");
  const char* tmp = std::getenv("TMPDIR");
  std::string dir_template = std::string(tmp && *tmp ? tmp : "/tmp") + "/headroom-launch-XXXXXX";
  if (!mkdtemp(dir_template.data())) {
    return fail("headroom launch: cannot create a directory like " + dir_template + ": " + std::strerror(errno));
  }
  const std::string dir = dir_template;

  // Stop signals are held while the ranks start, so none is lost between a fork and the
  // pid's store; the handler then forwards them. (A supervisor may have started this
  // launcher with them blocked already: they are unblocked below either way.)
  const sigset_t stops = protocol::StopSignalSet();
  sigprocmask(SIG_BLOCK, &stops, nullptr);
  struct sigaction sa {};
  sa.sa_handler = ForwardStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  const int k = o.ranks_per_pod;
  std::map<pid_t, int> local_of;
  std::vector<std::string> termination(k);
  for (int l = 0; l < k; ++l) {
    termination[l] = dir + "/rank-" + std::to_string(o.first_rank + l) + ".termination";
    std::vector<std::string> args{program};
    for (std::string a : o.worker_args) {
      const std::string placeholder = "{rank}", rank = std::to_string(o.first_rank + l);
      for (size_t at; (at = a.find(placeholder)) != std::string::npos;) a.replace(at, placeholder.size(), rank);
      args.push_back(std::move(a));
    }
    if (o.metrics_port != -1) {
      args.push_back("--metrics-port");
      args.push_back(std::to_string(o.metrics_port > 0 ? o.metrics_port + 1 + l : o.metrics_port));
    }
    const pid_t pid = StartRank(std::move(args), RankEnvironment(o.first_rank + l, l, termination[l]));
    if (pid < 0) {
      for (const auto& [p, _] : local_of) kill(p, SIGKILL);
      while (wait(nullptr) > 0) {
      }
      std::filesystem::remove_all(dir);
      return fail(std::string("headroom launch: fork: ") + std::strerror(errno));
    }
    local_of[pid] = l;
    g_pids[l].store(pid);
    g_count.store(l + 1);
  }
  sigprocmask(SIG_UNBLOCK, &stops, nullptr);

  std::optional<RankMetrics> served;
  if (o.metrics_port > 0) {
    try {
      served.emplace(o.metrics_port, k);
    } catch (const std::exception& e) {
      std::cerr << "headroom launch: /metrics not served: " << e.what() << "\n";
    }
  }

  std::vector<std::optional<End>> ends(k);
  int live = k;
  int decider = -1;
  Clock::time_point decided_at{};
  std::optional<Clock::time_point> kill_at;
  bool stopping = false;  // SIGTERM sent after a failure
  auto stop_others = [&](int signal_number) {
    for (int l = 0; l < k; ++l) {
      const pid_t pid = g_pids[l].load();
      if (!ends[l] && pid > 0) kill(pid, signal_number);
    }
  };
  while (live > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && local_of.count(pid)) {
      const int l = local_of[pid];
      g_pids[l].store(0);
      End e;
      if (WIFSIGNALED(status)) {
        e.signal = WTERMSIG(status);
        e.code = 128 + e.signal;
      } else {
        e.code = WEXITSTATUS(status);
      }
      ends[l] = e;
      --live;
      const Clock::time_point now = Clock::now();
      bool takes_over = decider < 0;
      if (!takes_over) {
        const End& d = *ends[decider];
        // A SIGTERM death after the launcher's own SIGTERM is its doing, not a reason.
        const bool ours = stopping && e.signal == SIGTERM;
        const bool sharper =
            (e.signal > 0 && !ours) || e.code == protocol::kExitInvalidSpec || e.code == protocol::kExitGpuOom;
        // A finish gives way to anything else; a plain failure to a sharper reason just after it.
        takes_over = (d.signal == 0 && d.code == protocol::kExitFinished && e.code != protocol::kExitFinished) ||
                     (d.signal == 0 && d.code == protocol::kExitFailure && sharper && now - decided_at <= kSettle);
      }
      if (takes_over) {
        decider = l;
        decided_at = now;
        if (!Orderly(e) && !stopping) {
          stopping = true;
          std::cerr << "headroom launch: rank " << o.first_rank + l << " ended (" << protocol::ExitReason(e.code, false)
                    << "); stopping the pod's other ranks\n";
          stop_others(SIGTERM);
          kill_at = now + o.stop_grace;
        } else if (!kill_at) {
          kill_at = now + o.orderly_grace;
        }
      }
      continue;
    }
    if (pid < 0 && errno == ECHILD) break;
    if (kill_at && Clock::now() >= *kill_at) {
      stop_others(SIGKILL);
      kill_at = Clock::now() + std::chrono::hours(24);  // once
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  served.reset();
  g_count.store(0);

  const End end = decider >= 0 ? *ends[decider] : End{protocol::kExitFailure, 0};
  const std::string message = decider >= 0 ? protocol::ReadTerminationFile(termination[decider]) : "";
  protocol::WriteTerminationMessage(message);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  ExitLike(end);
}

int RunLaunchCommand(int argc, char** argv) {
  LaunchOptions options;
  if (!ParseLaunchArguments(argc, argv, options, std::cerr)) return protocol::kExitFailure;
  return RunPodLauncher(options);
}

std::string MergeExpositions(const std::vector<std::string>& bodies) {
  struct Family {
    std::string help, type;
    std::string samples;
  };
  std::vector<std::string> order;
  std::map<std::string, Family> families;
  auto family = [&](const std::string& name) -> Family& {
    auto [it, added] = families.try_emplace(name);
    if (added) order.push_back(name);
    return it->second;
  };
  for (const std::string& body : bodies) {
    std::string current;
    size_t start = 0;
    while (start < body.size()) {
      size_t nl = body.find('\n', start);
      if (nl == std::string::npos) nl = body.size();
      const std::string line = body.substr(start, nl - start);
      start = nl + 1;
      if (line.empty()) continue;
      const bool help = line.rfind("# HELP ", 0) == 0, type = line.rfind("# TYPE ", 0) == 0;
      if (help || type) {
        const size_t name_end = line.find(' ', 7);
        current = line.substr(7, name_end == std::string::npos ? std::string::npos : name_end - 7);
        Family& f = family(current);
        std::string& slot = help ? f.help : f.type;
        if (slot.empty()) slot = line;
        continue;
      }
      if (line[0] == '#') continue;  // another comment
      if (current.empty()) current = line.substr(0, line.find_first_of("{ "));
      family(current).samples += line + "\n";
    }
  }
  std::string out;
  for (const std::string& name : order) {
    const Family& f = families[name];
    if (!f.help.empty()) out += f.help + "\n";
    if (!f.type.empty()) out += f.type + "\n";
    out += f.samples;
  }
  return out;
}

}  // namespace headroom::launch
