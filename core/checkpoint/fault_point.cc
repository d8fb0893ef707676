#include "core/checkpoint/fault_point.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "core/protocol/environment.h"

namespace headroom::checkpoint {
namespace {

struct FaultPointChoice {
  std::string point;  // "" = none
  int64_t step = -1;  // -1 = any step
};

FaultPointChoice ChoiceFromEnvironment() {
  FaultPointChoice choice;
  const char* v = std::getenv(protocol::kKillAtPointEnv);
  if (!v) return choice;
  const std::string text = v;
  const size_t at = text.find('@');
  choice.point = text.substr(0, at);
  if (at != std::string::npos) choice.step = std::strtoll(text.c_str() + at + 1, nullptr, 10);
  return choice;
}

}  // namespace

void ReachedFaultPoint(const char* point, int64_t step) {
  static const FaultPointChoice choice = ChoiceFromEnvironment();
  if (choice.point.empty() || choice.point != point || (choice.step >= 0 && choice.step != step)) return;
  ::kill(::getpid(), SIGKILL);
  for (;;) ::pause();  // SIGKILL cannot be caught or ignored: the signal ends this wait
}

}  // namespace headroom::checkpoint
