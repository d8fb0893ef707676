#include "worker/telemetry/model_fetch_report.h"

#include <spdlog/spdlog.h>

#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <stdexcept>

#include "core/metrics/metrics_http_server.h"
#include "core/metrics/names.h"
#include "core/protocol/model_fetch_record.h"

namespace headroom::worker {

ModelFetchReport::ModelFetchReport(ModelFetchReportOptions options)
    : options_(std::move(options)), log_(options_.log_path) {
  if (options_.metrics_port < 0) return;
  namespace m = headroom::metrics;
  registry_ = std::make_shared<prometheus::Registry>();
  health_ = std::make_shared<prometheus::Registry>();
  done_family_ = &prometheus::BuildGauge()
                      .Name(m::kWorkerModelFetchDoneBytes)
                      .Help("Bytes of the model's files fetched so far, cached ones included")
                      .Register(*registry_);
  total_family_ = &prometheus::BuildGauge()
                       .Name(m::kWorkerModelFetchTotalBytes)
                       .Help("Bytes of every model file the worker needs")
                       .Register(*registry_);
  prometheus::BuildGauge()
      .Name("headroom_worker_up")
      .Help("1 while the worker serves requests")
      .Register(*health_)
      .Add({{m::kLabelJob, options_.job_name}, {m::kLabelRank, std::to_string(options_.rank)}})
      .Set(1);
  server_ = std::make_unique<metrics::MetricsHttpServer>(options_.metrics_bind, options_.metrics_port);
  server_->HandleCollectable("/metrics", registry_);
  server_->HandleCollectable("/healthz", health_);
  try {
    server_->Start();
  } catch (const std::exception& e) {
    throw std::runtime_error("--metrics-port " + std::to_string(options_.metrics_port) + ": " + e.what());
  }
}

int ModelFetchReport::port() const { return server_ ? server_->port() : 0; }

// The server stops before the registries it reads go.
ModelFetchReport::~ModelFetchReport() { server_.reset(); }

void ModelFetchReport::SetGauges(const std::string& file, int64_t done_bytes, int64_t total_bytes) {
  if (!server_) return;
  if (file != gauge_file_ || done_ == nullptr) {
    // One series per fetch: the file label moves, the old series goes.
    if (done_ != nullptr) {
      done_family_->Remove(done_);
      total_family_->Remove(total_);
    }
    namespace m = headroom::metrics;
    const prometheus::Labels labels{{m::kLabelJob, options_.job_name}, {m::kLabelRank, std::to_string(options_.rank)},
                                    {m::kLabelRepo, options_.repo},    {m::kLabelRevision, options_.revision},
                                    {m::kLabelFile, file}};
    done_ = &done_family_->Add(labels);
    total_ = &total_family_->Add(labels);
    gauge_file_ = file;
  }
  done_->Set(static_cast<double>(done_bytes));
  total_->Set(static_cast<double>(total_bytes));
}

void ModelFetchReport::Progress(const std::string& file, int64_t done_bytes, int64_t total_bytes) {
  SetGauges(file, done_bytes, total_bytes);
  const int hundredth = total_bytes > 0 ? static_cast<int>(100 * done_bytes / total_bytes) : 100;
  if (hundredth == recorded_hundredth_) return;
  const bool new_tenth = hundredth / 10 != recorded_hundredth_ / 10 || recorded_hundredth_ < 0;
  recorded_hundredth_ = hundredth;
  log_.Write(protocol::ModelFetchRecord{options_.repo, options_.revision, file, done_bytes, total_bytes});
  if (new_tenth) {
    spdlog::info("model {}@{}: fetched {} of {} bytes ({})", options_.repo, options_.revision, done_bytes, total_bytes,
                 file);
  }
}

}  // namespace headroom::worker
