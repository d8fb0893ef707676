#include "worker/train/stop_request.h"

#include <atomic>

#include "core/protocol/stop_signals.h"

namespace headroom::worker {
namespace {

std::atomic<int> g_stop_signal{0};

extern "C" void HandleStopSignal(int signal_number) { g_stop_signal.store(signal_number); }

}  // namespace

void InstallStopSignalHandlers() { protocol::HandleStopSignals(HandleStopSignal); }

bool StopRequested() { return g_stop_signal.load() != 0; }
int StopSignal() { return g_stop_signal.load(); }
void RequestStop(int signal_number) { g_stop_signal.store(signal_number); }
void ClearStopRequest() { g_stop_signal.store(0); }

}  // namespace headroom::worker
