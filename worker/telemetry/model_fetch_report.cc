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

struct ModelFetchReport::Endpoint {
  explicit Endpoint(const ModelFetchReportOptions& options);
  ~Endpoint() { server.reset(); }  // the server stops before the registries it reads go
  // One series per fetch: the file label moves with the file, the old series goes.
  void Set(const ModelFetchReportOptions& options, const std::string& file, int64_t done_bytes, int64_t total_bytes);

  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::shared_ptr<prometheus::Registry> health = std::make_shared<prometheus::Registry>();
  std::unique_ptr<metrics::MetricsHttpServer> server;
  prometheus::Family<prometheus::Gauge>* done_family = nullptr;
  prometheus::Family<prometheus::Gauge>* total_family = nullptr;
  prometheus::Gauge* done = nullptr;  // the series of the current file
  prometheus::Gauge* total = nullptr;
  std::string file;
};

ModelFetchReport::Endpoint::Endpoint(const ModelFetchReportOptions& options) {
  namespace m = headroom::metrics;
  done_family = &prometheus::BuildGauge()
                     .Name(m::kWorkerModelFetchDoneBytes)
                     .Help("Bytes of the model's files fetched so far, cached ones included")
                     .Register(*registry);
  total_family = &prometheus::BuildGauge()
                      .Name(m::kWorkerModelFetchTotalBytes)
                      .Help("Bytes of every model file the worker needs")
                      .Register(*registry);
  prometheus::BuildGauge()
      .Name("headroom_worker_up")
      .Help("1 while the worker serves requests")
      .Register(*health)
      .Add({{m::kLabelJob, options.job_name}, {m::kLabelRank, std::to_string(options.rank)}})
      .Set(1);
  server = std::make_unique<metrics::MetricsHttpServer>(options.metrics_bind, options.metrics_port);
  server->HandleCollectable("/metrics", registry);
  server->HandleCollectable("/healthz", health);
  try {
    server->Start();
  } catch (const std::exception& e) {
    throw std::runtime_error("--metrics-port " + std::to_string(options.metrics_port) + ": " + e.what());
  }
}

void ModelFetchReport::Endpoint::Set(const ModelFetchReportOptions& options, const std::string& new_file,
                                     int64_t done_bytes, int64_t total_bytes) {
  if (new_file != file || done == nullptr) {
    if (done != nullptr) {
      done_family->Remove(done);
      total_family->Remove(total);
    }
    namespace m = headroom::metrics;
    const prometheus::Labels labels{{m::kLabelJob, options.job_name},
                                    {m::kLabelRank, std::to_string(options.rank)},
                                    {m::kLabelRepo, options.repo},
                                    {m::kLabelRevision, options.revision},
                                    {m::kLabelFile, new_file}};
    done = &done_family->Add(labels);
    total = &total_family->Add(labels);
    file = new_file;
  }
  done->Set(static_cast<double>(done_bytes));
  total->Set(static_cast<double>(total_bytes));
}

ModelFetchReport::ModelFetchReport(ModelFetchReportOptions options)
    : options_(std::move(options)), log_(options_.log_path) {
  if (options_.metrics_port >= 0) endpoint_ = std::make_unique<Endpoint>(options_);
}

ModelFetchReport::~ModelFetchReport() = default;

int ModelFetchReport::port() const { return endpoint_ ? endpoint_->server->port() : 0; }

void ModelFetchReport::Progress(const std::string& file, int64_t done_bytes, int64_t total_bytes) {
  if (endpoint_) endpoint_->Set(options_, file, done_bytes, total_bytes);
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
