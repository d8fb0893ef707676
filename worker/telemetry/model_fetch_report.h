// How far a worker has got fetching its spec.model.hub model, before its first step, told
// where its supervisors look: model-fetch lines (core/protocol/model_fetch_record.h) in the
// step log, which `headroom run` tails, every hundredth of the bytes; on --metrics-port the
// series the operator scrapes for status.modelFetch (core/metrics/names.h:
// headroom_worker_model_fetch_done_bytes and _total_bytes, labelled {job, rank, repo,
// revision, file}) and /healthz; and a log line every tenth.
//
// The endpoint lives as long as this object: once the model is in place the worker's step
// telemetry binds the same port (worker_metrics.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/base/non_copyable.h"
#include "worker/telemetry/step_log.h"

namespace headroom::worker {

struct ModelFetchReportOptions {
  std::string job_name;
  int rank = 0;
  std::string log_path;   // the step log: "" = stdout
  int metrics_port = -1;  // -1 = no endpoint, 0 = any free port
  std::string metrics_bind = "0.0.0.0";
  std::string repo, revision;
};

class ModelFetchReport : NonCopyable {
 public:
  // Throws std::runtime_error when the step log cannot be opened or the port bound.
  explicit ModelFetchReport(ModelFetchReportOptions options);
  ~ModelFetchReport();

  int port() const;  // the endpoint's port; 0 without one

  // The fetch's running totals (of every file it needs) and the file it is on.
  void Progress(const std::string& file, int64_t done_bytes, int64_t total_bytes);

 private:
  struct Endpoint;  // the registries, their server and the current file's series (.cc)

  ModelFetchReportOptions options_;
  StepLogWriter log_;
  int recorded_hundredth_ = -1;
  std::unique_ptr<Endpoint> endpoint_;  // null without --metrics-port
};

}  // namespace headroom::worker
