// The pod's launcher (docs/design.md, "Ranks per pod"): one process that runs a pod's
// ranksPerPod ranks and stands for them towards the pod's supervisor (the kubelet, or
// `headroom run`'s local backend), so a pod of several ranks ends as a pod of one does:
//
//   headroom-worker launch --ranks-per-pod K --first-rank R [--metrics-port P]
//                          [--worker PATH] [--stop-grace-seconds S] -- WORKER_ARGS...
//
// Each rank L in [0, K) is WORKER (default: this program) run with WORKER_ARGS, RANK = R + L,
// LOCAL_RANK = L (its device is cuda:LOCAL_RANK), HEADROOM_TERMINATION_LOG = a file of its
// own, and `--metrics-port P+1+L` when P > 0 (P itself when P <= 0); "{rank}" in WORKER_ARGS
// becomes R + L (`--log DIR/rank-{rank}.log`: a step log per rank). The rest of the
// environment (WORLD_SIZE, MASTER_ADDR, ...) is the launcher's. Contract:
//   - SIGTERM and SIGINT are forwarded to every rank still running (each drains to the
//     checkpoint, exit 75); the launcher waits for them. Each rank starts with them
//     blocked (BecomeSupervisedWorker), so one that is still loading takes the stop when
//     it installs its handler, instead of dying of it.
//   - When a rank ends, the launcher decides the pod's end from it. A failure (any code
//     but 0, 75, 76: a crash, 2, 77, a kill such as the OOM killer's 137) stops the others
//     at once: SIGTERM, then SIGKILL after the stop grace (their peer is gone; they would
//     wait out a collective timeout). An orderly end (75 drained, 76 guard stop) is one
//     every rank agreed on at a step boundary: the others are writing the same
//     checkpoint and are given the orderly grace before SIGKILL. A 0 (finished) waits for
//     the others, and a failure among them replaces it.
//   - The pod exits with the deciding rank's exit code and leaves that rank's termination
//     message as its own (protocol::WriteTerminationMessage: /dev/termination-log in a
//     pod, $HEADROOM_TERMINATION_LOG locally), so a supervisor reads 137, 76, 77 or 2
//     exactly as from a pod of one rank. A rank killed by a signal is re-raised on the
//     launcher (137 by SIGKILL); where that cannot kill it (PID 1 of a container ignores
//     its own signals) it exits 128 + the signal.
//   - With P > 0 the launcher serves P itself: /metrics is every rank's series (each
//     already labelled {rank}) merged family by family (MergeExpositions), /healthz
//     answers 200 while every rank's does.
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

namespace headroom::launch {

struct LaunchOptions {
  int ranks_per_pod = 1;
  int first_rank = 0;
  int metrics_port = -1;  // the pod's; <= 0: ranks get the same value and nothing is served
  std::string worker;     // the rank's program; "" = this program (/proc/self/exe)
  std::vector<std::string> worker_args;
  std::chrono::milliseconds stop_grace{std::chrono::seconds(10)};      // after a failure
  std::chrono::milliseconds orderly_grace{std::chrono::seconds(100)};  // after 75/76
};

// Parses the arguments after `launch` (argv[0] is "launch"). nullopt-like: on a bad
// command line prints one line to `err` and returns false.
bool ParseLaunchArguments(int argc, char** argv, LaunchOptions& options, std::ostream& err);

// Runs the ranks and returns the pod's exit code (or does not return: a rank's signal
// re-raised). Startup failures (no such worker, a fork failing) return 1 with the reason
// on stderr and in the termination message.
int RunPodLauncher(const LaunchOptions& options);

// `headroom-worker launch ...`: parse, run. argv[0] is "launch".
int RunLaunchCommand(int argc, char** argv);

// Several Prometheus text expositions as one: each family's # HELP and # TYPE once (the
// first body's), followed by its samples from every body in order; families in the order
// they first appear. Sample lines before any # HELP/# TYPE stay in a family of their own
// named after the sample.
std::string MergeExpositions(const std::vector<std::string>& bodies);

}  // namespace headroom::launch
