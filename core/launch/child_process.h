// What a supervisor does to start a child program it owns: the pod launcher its ranks
// (pod_launcher.h), `headroom run` its workers and launchers (local/local_process_backend.h).
// One place, so every child behaves alike towards signals and towards its supervisor's death.
#pragma once

#include <sys/types.h>

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

}  // namespace headroom::launch
