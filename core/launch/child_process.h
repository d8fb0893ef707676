// What a supervisor does to start a child program it owns: the pod launcher its ranks
// (pod_launcher.h), `headroom run` its workers and launchers (local/local_process_backend.h).
// One place, so every child behaves alike towards signals and towards its supervisor's death.
// Also a short helper program run to its end for its output (`headroom plan` asks the worker
// for the job's prompt lengths: RunToCompletion).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace headroom::launch {

// This process's environment (NAME=value entries) without the variables named in
// `replaced`: the caller appends its own values for them, so a child never sees a name twice.
std::vector<std::string> EnvironmentWithout(const std::vector<std::string>& replaced);

// A program's argv and envp as execve wants them. Built before fork: between fork and
// exec a child of a threaded process may not allocate.
class ExecImage {
 public:
  // args[0] is the program's path (not searched in PATH); env holds NAME=value entries.
  ExecImage(std::vector<std::string> args, std::vector<std::string> env);
  ExecImage(const ExecImage&) = delete;
  ExecImage& operator=(const ExecImage&) = delete;

  // Replaces this process with the program; when exec fails, writes `failure_line` to
  // stderr and exits 127 (the shell's "cannot execute"). Async-signal-safe.
  [[noreturn]] void ExecOrExit(const char* failure_line) const;

 private:
  std::vector<std::string> args_;
  std::vector<std::string> env_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
};

// In a child just forked by `parent`, before exec: its own process group (a terminal's
// Ctrl-C reaches only the supervisor, which forwards it once), SIGKILL when the supervisor
// dies (exit 127 at once if it already has), SIGINT and SIGTERM at their defaults and no
// signal blocked, whatever the supervisor had set for itself. Async-signal-safe.
void BecomeSupervisedChild(pid_t parent);

// The same for a worker (or a pod's launcher), except that SIGTERM and SIGINT stay
// blocked through exec: the worker unblocks them as it installs its handler
// (protocol::HandleStopSignals), so a stop sent while it still loads is delivered then
// instead of killing it. Only for programs that install one; fork them inside a
// StopSignalsBlocked, or a stop sent before this call still kills the child.
// Async-signal-safe.
void BecomeSupervisedWorker(pid_t parent);

// Blocks SIGTERM and SIGINT in the calling thread while it lives, then restores the mask
// it found (a stop sent meanwhile is delivered then). A worker forked inside one is born
// with them blocked.
class StopSignalsBlocked {
 public:
  StopSignalsBlocked();
  ~StopSignalsBlocked();
  StopSignalsBlocked(const StopSignalsBlocked&) = delete;
  StopSignalsBlocked& operator=(const StopSignalsBlocked&) = delete;

 private:
  sigset_t previous_;
};

// What a program run to completion printed and how it ended.
struct CompletedProcess {
  int exit_code = 0;  // its exit status; 128 + N when signal N ended it; 127 when it could not be executed
  std::string out;    // its stdout, at most max_output_bytes of it
  std::string err;    // its stderr, likewise
};

// Runs args[0] (a path, not searched in PATH) with `args` and this process's environment,
// stdin from /dev/null, as a supervised child (it dies with this process), and waits for
// it. Output past max_output_bytes per stream is read and dropped, so a chatty program
// neither blocks on a full pipe nor grows this process. No shell: arguments reach the
// program as they are. Throws std::system_error when the pipes or the fork fail.
CompletedProcess RunToCompletion(const std::vector<std::string>& args, size_t max_output_bytes = 1 << 20);

}  // namespace headroom::launch
