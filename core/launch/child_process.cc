#include "core/launch/child_process.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

extern char** environ;

namespace headroom::launch {

std::vector<std::string> EnvironmentWithout(const std::vector<std::string>& replaced) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    if (std::find(replaced.begin(), replaced.end(), name) == replaced.end()) env.push_back(kv);
  }
  return env;
}

ExecImage::ExecImage(std::vector<std::string> args, std::vector<std::string> env)
    : args_(std::move(args)), env_(std::move(env)) {
  for (std::string& a : args_) argv_.push_back(a.data());
  argv_.push_back(nullptr);
  for (std::string& e : env_) envp_.push_back(e.data());
  envp_.push_back(nullptr);
}

void ExecImage::ExecOrExit(const char* failure_line) const {
  if (!args_.empty()) execve(argv_[0], argv_.data(), envp_.data());
  (void)!write(STDERR_FILENO, failure_line, std::strlen(failure_line));
  _exit(127);
}

void BecomeSupervisedChild(pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The supervisor died before the line above took effect: nobody would kill us.
  if (getppid() != parent) _exit(127);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

}  // namespace headroom::launch
