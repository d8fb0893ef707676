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

#include "worker/telemetry/step_log.h"

namespace headroom::metrics {
class MetricsHttpServer;
}

namespace prometheus {
class Registry;
class Gauge;
template <typename T>
class Family;
}  // namespace prometheus

namespace headroom::worker {

struct ModelFetchReportOptions {
  std::string job_name;
  int rank = 0;
  std::string log_path;          // the step log: "" = stdout
  int metrics_port = -1;         // -1 = no endpoint, 0 = any free port
  std::string metrics_bind = "0.0.0.0";
  std::string repo, revision;
};

class ModelFetchReport {
 public:
  // Throws std::runtime_error when the step log cannot be opened or the port bound.
  explicit ModelFetchReport(ModelFetchReportOptions options);
  ~ModelFetchReport();
  ModelFetchReport(const ModelFetchReport&) = delete;
  ModelFetchReport& operator=(const ModelFetchReport&) = delete;

  int port() const;  // the endpoint's port; 0 without one

  // The fetch's running totals (of every file it needs) and the file it is on.
  void Progress(const std::string& file, int64_t done_bytes, int64_t total_bytes);

 private:
  void SetGauges(const std::string& file, int64_t done_bytes, int64_t total_bytes);

  ModelFetchReportOptions options_;
  StepLogWriter log_;
  int recorded_hundredth_ = -1;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Registry> health_;
  std::unique_ptr<metrics::MetricsHttpServer> server_;
  prometheus::Family<prometheus::Gauge>* done_family_ = nullptr;
  prometheus::Family<prometheus::Gauge>* total_family_ = nullptr;
  prometheus::Gauge* done_ = nullptr;   // the series of the current file
  prometheus::Gauge* total_ = nullptr;
  std::string gauge_file_;
};

}  // namespace headroom::worker
