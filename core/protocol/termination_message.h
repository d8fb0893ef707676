// The termination message: the few lines a worker leaves for its supervisor when it
// exits, in the file $HEADROOM_TERMINATION_LOG names when it is set (`headroom run` gives
// every rank one, and so does a pod's launcher to each of its ranks), else where Kubernetes
// looks for them (/dev/termination-log, surfaced as the container's terminated.message).
//
// What is in it depends on the exit code (exit_codes.h):
//   76  guard::Decision::ToJson()       the guard's decision
//   77  GpuOomReport::ToJson()          the CUDA allocator's numbers at the failed request
//   1, 2  WorkerErrorMessage()          the worker's reason, whole (several lines, maybe)
//   a kill (137)  LoadedPhaseMessage()  when it came after loading, before or in a step
// Kubernetes keeps at most 4 KiB of it (kMaxTerminationMessageBytes): WorkerErrorMessage
// cuts a longer reason to fit, saying so; the worker's output holds it whole.
//
// This file is the one writer and the one reader of the message: the worker writes it,
// and both supervisors (`headroom run`'s local backend, the operator's pod backend) read
// it through ReadTerminationFile / StatedReason / CheckpointedStep.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace headroom::protocol {

inline constexpr const char* kTerminationLogPath = "/dev/termination-log";

// Writes `message` (plus a newline) to $HEADROOM_TERMINATION_LOG when set, else to
// /dev/termination-log when it exists. Returns the path written, or "" when there is no
// destination or it cannot be written (the exit code still tells the supervisor what
// happened). An empty `message` empties the file (Kubernetes then shows a failed
// container's log tail instead).
std::string WriteTerminationMessage(const std::string& message);

inline constexpr size_t kMaxTerminationMessageBytes = 4096;

// A worker's error, as it exits 1 (a failure) or 2 (an input it refuses): one line of JSON
// {"error":"worker_error","message":"<the reason, whole>"} of at most
// kMaxTerminationMessageBytes; a longer reason is cut there and ends "... (cut to N bytes:
// the whole reason is in the worker's output)".
std::string WorkerErrorMessage(const std::string& reason);

// The reason a worker stated in its message (WorkerErrorMessage's "message"), whole; ""
// for any other message (a decision, a report, the loaded phase, none). Plain text that is
// not JSON (a log tail Kubernetes put there, an older worker's line) is not a statement:
// the caller picks its line with CrashReasonLine.
std::string StatedReason(const std::string& message);

// The message a local rank left in its HEADROOM_TERMINATION_LOG file, trailing
// whitespace removed; "" when there is none.
std::string ReadTerminationFile(const std::string& path);

// The step the worker says it checkpointed as it exited, when its message says one: a
// guard stop (exit 76) checkpoints the step its decision names ("step").
std::optional<int64_t> CheckpointedStep(int exit_code, const std::string& message);

// A CUDA out-of-memory (exit 77). Byte counts are the caching allocator's for `device` at
// the moment the request failed; requested_bytes is 0 when the error did not say.
//
// JSON: {"error":"gpu_oom","device":"cuda:0","step":7,"allocated_bytes":...,
//        "reserved_bytes":...,"requested_bytes":...,"total_bytes":...,"message":"..."}
struct GpuOomReport {
  std::string device;  // "cuda:0"
  int64_t step = 0;    // the step that ran out (1-based: the step being computed)
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t requested_bytes = 0;  // 0 = unknown
  int64_t total_bytes = 0;      // device capacity; 0 = unknown
  std::string message;          // the allocator's message, first line

  std::string ToJson() const;  // one line
  // nullopt when `text` is not a GpuOomReport (another exit's message, plain text).
  static std::optional<GpuOomReport> FromJson(const std::string& text);
  // "CUDA out of memory on cuda:0 at step 7: tried to allocate 2 GiB with 70 GiB
  // allocated, 74 GiB reserved of 80 GiB" — what supervisors show.
  std::string Describe() const;
};

// The phase a worker reached, for a supervisor to read after a kill that let it write
// nothing (the kernel's OOM killer): once the model, tokenizer and dataset are loaded and
// the checkpoint is resumed, just before its first step, a worker writes
//   {"phase":"loaded","next_step":N}
// as its termination message (N: the 1-based step it starts with), and empties it again
// once that step is done (so a later crash that writes nothing leaves Kubernetes the log
// tail). Any exit that has something to say replaces it; a worker killed while still
// loading leaves none. So an
// out-of-memory kill with this message happened in a step (memory the guard can act on),
// one without it while reading the inputs (which more workers or smaller batches do not
// change).
std::string LoadedPhaseMessage(int64_t next_step);
// The step the worker was about to start when `message` is a LoadedPhaseMessage, else
// nullopt (another exit's message, or none).
std::optional<int64_t> LoadedPhaseNextStep(const std::string& message);

// The bytes a CUDA out-of-memory message says were requested ("Tried to allocate
// 2.00 GiB"), or 0 when it names none.
int64_t RequestedBytesFromOomMessage(const std::string& message);

// The line of a crashed worker's output that says why it crashed, skipping what libraries
// print around it — LibTorch's C++ stack traces ("frame #26: <unknown function> +
// 0xc21d5", "Exception raised from ..."), its "[W ...]" warnings, and blank lines. The
// last line spdlog marked "[error]"/"[critical]" (its message, without the prefix); else
// the last line no logger marked (a refusal's `FILE:LINE: ...`, "Segmentation fault");
// else the last "[warning]" message. Never an "[info]"/"[debug]"/"[trace]" line or a step
// record (progress, not a cause): "" when nothing else qualifies.
std::string CrashReasonLine(const std::string& output);

}  // namespace headroom::protocol
