// Telemetry: the step log's keys, the Prometheus endpoint (names, labels, /healthz) over
// real HTTP, the debug host leak showing up in resident memory, and the step-end heap
// trim returning freed memory only when it matters.
#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/memory/host_memory.h"
#include "core/metrics/names.h"
#include "core/metrics/prometheus_text.h"
#include "core/protocol/step_metrics.h"
#include "worker/telemetry/blas_info.h"
#include "worker/telemetry/debug_leaks.h"
#include "worker/telemetry/heap_trim.h"
#include "worker/telemetry/step_log.h"
#include "worker/telemetry/model_fetch_report.h"
#include "worker/telemetry/worker_metrics.h"

namespace headroom::worker {
namespace {

// A minimal HTTP/1.0 GET against 127.0.0.1: returns the whole response.
std::string HttpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  (void)::write(fd, request.data(), request.size());
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) response.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return response;
}

TEST(StepLog, OneJsonObjectPerLineWithEveryDesignKey) {
  const auto path = std::filesystem::temp_directory_path() / ("headroom-steplog-" + std::to_string(::getpid()));
  {
    StepLogWriter writer(path.string());
    protocol::StepRecord r;
    r.step = 1;
    r.reward_mean = 0.25;
    r.tokens = 1280;
    writer.Write(r);
    r.step = 2;
    writer.Write(r);
  }
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    auto j = nlohmann::json::parse(line);
    for (const char* key : {"step",
                            "reward_mean",
                            "loss",
                            "kl",
                            "host_bytes",
                            "host_peak_bytes",
                            "host_limit_bytes",
                            "gpu_allocated_bytes",
                            "gpu_reserved_bytes",
                            "gpu_peak_bytes",
                            "gpu_total_bytes",
                            "tokens",
                            "step_seconds",
                            "tokens_per_second",
                            "next_step_tokens",
                            "world_size",
                            "micro_batch_size",
                            "checkpoint_bytes",
                            "checkpoint_seconds",
                            "epoch",
                            "cursor",
                            "prompts_filtered"}) {
      EXPECT_TRUE(j.contains(key)) << key;
    }
    EXPECT_EQ(j["step"].get<int>(), lines);
  }
  EXPECT_EQ(lines, 2);
  std::filesystem::remove(path);
  EXPECT_THROW(StepLogWriter("/nonexistent-dir/x.jsonl"), std::runtime_error);
}

TEST(WorkerMetrics, ServesDesignNamesWithJobAndRankAndHealthz) {
  WorkerMetrics metrics("reverse-tiny", 0, 0, "127.0.0.1");
  ASSERT_GT(metrics.port(), 0);
  protocol::StepRecord r;
  r.step = 7;
  r.host_bytes = 123456789;
  r.reward_mean = 0.5;
  r.tokens = 100;
  r.step_seconds = 0.3;
  metrics.Publish(r);
  const std::string body = HttpGet(metrics.port(), "/metrics");
  ASSERT_NE(body.find("200 OK"), std::string::npos) << body;
  EXPECT_NE(body.find(std::string(metrics::kWorkerStep) + "{job=\"reverse-tiny\",rank=\"0\"} 7"), std::string::npos)
      << body;
  EXPECT_NE(body.find(std::string(metrics::kWorkerHostMemoryBytes) + "{job=\"reverse-tiny\",rank=\"0\"} 123456789"),
            std::string::npos);
  EXPECT_NE(body.find(std::string(metrics::kWorkerMemoryGrowthBytesPerStep) +
                      "{job=\"reverse-tiny\",rank=\"0\",resource=\"host\"}"),
            std::string::npos);
  EXPECT_NE(body.find(std::string(metrics::kWorkerStepDurationSeconds) + "_bucket"), std::string::npos);
  EXPECT_NE(body.find(std::string(metrics::kWorkerTokensTotal)), std::string::npos);
  const std::string health = HttpGet(metrics.port(), "/healthz");
  EXPECT_NE(health.find("200 OK"), std::string::npos) << health;
  EXPECT_NE(health.find("headroom_worker_up"), std::string::npos);
  EXPECT_EQ(HttpGet(metrics.port(), "/nothing-here").find("200 OK"), std::string::npos);
}

// A record whose every field differs from its default and from every other field, so a
// field the operator does not read back (or reads into another) shows.
protocol::StepRecord DistinctRecord() {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(protocol::StepRecord().ToJson());
  int i = 0;
  for (auto& [key, value] : j.items()) {
    ++i;
    if (value.is_string()) {
      value = "restart";
    } else if (value.is_number_integer()) {
      value = 1000 * i + 7;
    } else {
      value = i + 0.25;  // exact in binary and in prometheus-cpp's 16 digits
    }
  }
  return *protocol::ParseStepLogLine(j.dump());
}

TEST(WorkerMetrics, EveryStepRecordFieldRoundTripsThroughTheOperatorsReader) {
  const protocol::StepRecord sent = DistinctRecord();
  ASSERT_NE(sent.ToJson(), protocol::StepRecord().ToJson());
  WorkerMetrics metrics("round-trip", sent.rank, 0, "127.0.0.1");
  metrics.Publish(sent);
  const std::string page = HttpGet(metrics.port(), "/metrics");
  const std::optional<protocol::StepRecord> back =
      protocol::StepRecordFromMetrics(metrics::ParsePrometheusText(page.substr(page.find("\r\n\r\n") + 4)));
  ASSERT_TRUE(back) << page;
  EXPECT_EQ(back->ToJson(), sent.ToJson());

  protocol::StepRecord changed = sent;
  changed.step += 1;
  changed.guard_action = "none";
  changed.heldout_problems = 0;  // no evaluation this step: the latest one's numbers stay
  changed.heldout_reward = -1;
  metrics.Publish(changed);
  const std::string next = HttpGet(metrics.port(), "/metrics");
  const auto again =
      protocol::StepRecordFromMetrics(metrics::ParsePrometheusText(next.substr(next.find("\r\n\r\n") + 4)));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->guard_action, "none") << "the previous action's series is gone";
  EXPECT_EQ(again->heldout_problems, sent.heldout_problems);
  EXPECT_EQ(again->heldout_reward, sent.heldout_reward);
}

TEST(WorkerMetrics, ABusyPortIsAClearError) {
  WorkerMetrics first("j", 0, 0, "127.0.0.1");
  try {
    WorkerMetrics second("j", 0, first.port(), "127.0.0.1");
    FAIL() << "bound a busy port";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--metrics-port"), std::string::npos) << e.what();
  }
}

TEST(ModelFetchReport, StepLogLinesPerHundredthAndOneMetricsSeriesPerFetch) {
  const std::string log =
      (std::filesystem::temp_directory_path() / ("fetch-report-" + std::to_string(::getpid()))).string();
  int port = 0;
  {
    ModelFetchReport report({"job", 1, log, 0, "127.0.0.1", "org/name", "main"});
    port = report.port();
    ASSERT_GT(port, 0);
    report.Progress("config.json", 100, 1000);
    report.Progress("model.safetensors", 500, 1000);
    report.Progress("model.safetensors", 505, 1000);  // the same hundredth: no new line
    const std::string body = HttpGet(port, "/metrics");
    const std::string labels = R"({file="model.safetensors",job="job",rank="1",repo="org/name",revision="main"})";
    EXPECT_NE(body.find(std::string(metrics::kWorkerModelFetchDoneBytes) + labels + " 505"), std::string::npos) << body;
    EXPECT_NE(body.find(std::string(metrics::kWorkerModelFetchTotalBytes) + labels + " 1000"), std::string::npos)
        << body;
    EXPECT_EQ(body.find("config.json"), std::string::npos) << "the finished file's series is gone: " << body;
    EXPECT_NE(HttpGet(port, "/healthz").find("headroom_worker_up"), std::string::npos);
  }
  std::ifstream in(log);
  std::vector<protocol::ModelFetchRecord> lines;
  for (std::string line; std::getline(in, line);) {
    std::optional<protocol::ModelFetchRecord> r = protocol::ParseModelFetchLine(line);
    ASSERT_TRUE(r) << line;
    lines.push_back(*r);
  }
  std::filesystem::remove(log);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].file, "model.safetensors");
  EXPECT_EQ(lines[1].done_bytes, 500);
  EXPECT_EQ(lines[1].total_bytes, 1000);
  // The step telemetry takes the port over once the model is in place.
  WorkerMetrics after("job", 1, port, "127.0.0.1");
  EXPECT_EQ(after.port(), port);
}

TEST(DebugLeaks, HostLeakIsResidentAndHeld) {
  const int64_t before = memory::ReadProcMemory().working_set_bytes;
  DebugLeaks leaks(32 << 20, 0, torch::kCPU);
  leaks.Step(1);
  leaks.Step(2);
  const int64_t after = memory::ReadProcMemory().working_set_bytes;
  EXPECT_EQ(leaks.host_leaked_bytes(), 64 << 20);
  EXPECT_GT(after - before, 60 << 20) << "RSS grew by " << (after - before);
}

TEST(DebugLeaks, HostLeakWithADecayLevelsOff) {
  DebugLeaks leaks(32 << 20, 0, torch::kCPU, /*host_decay=*/0.5);
  leaks.Step(1);
  EXPECT_EQ(leaks.host_leaked_bytes(), 32 << 20);
  leaks.Step(2);
  EXPECT_EQ(leaks.host_leaked_bytes(), 48 << 20);
  leaks.Step(3);
  EXPECT_EQ(leaks.host_leaked_bytes(), 56 << 20);
}

TEST(DebugLeaks, HostJumpIsAllocatedOnceAtItsStepAndHeld) {
  DebugLeaks leaks(0, 0, torch::kCPU, /*host_decay=*/1.0, /*host_jump_at_step=*/3, /*host_jump_bytes=*/40 << 20);
  leaks.Step(1);
  leaks.Step(2);
  EXPECT_EQ(leaks.host_leaked_bytes(), 0);
  const int64_t before = memory::ReadProcMemory().working_set_bytes;
  leaks.Step(3);
  const int64_t after = memory::ReadProcMemory().working_set_bytes;
  EXPECT_EQ(leaks.host_leaked_bytes(), 40 << 20);
  EXPECT_GT(after - before, 36 << 20) << "RSS grew by " << (after - before);
  leaks.Step(4);
  EXPECT_EQ(leaks.host_leaked_bytes(), 40 << 20);
  // A worker resumed past the step holds it from its first step, as the first one did.
  DebugLeaks resumed(0, 0, torch::kCPU, 1.0, 3, 8 << 20);
  resumed.Step(7);
  EXPECT_EQ(resumed.host_leaked_bytes(), 8 << 20);
}

TEST(DebugLeaks, GpuLeakIgnoredOnCpu) {
  DebugLeaks leaks(0, 1 << 20, torch::kCPU);
  leaks.Step(1);
  EXPECT_EQ(leaks.gpu_leaked_bytes(), 0);
}

TEST(HeapTrim, ThresholdIsASixtyFourthOfTheLimitAtMost64MiB) {
  EXPECT_EQ(HeapTrimThreshold(0), 64 << 20);                  // no limit known
  EXPECT_EQ(HeapTrimThreshold(int64_t{1} << 30), 16 << 20);   // 1 GiB
  EXPECT_EQ(HeapTrimThreshold(int64_t{64} << 30), 64 << 20);  // 64 GiB: capped
}

// 96 MiB in 64 KiB blocks (under glibc's mmap threshold, so from the heap), touched, then
// freed behind a block that stays: they coalesce below the heap's top, so glibc keeps them
// resident until a trim. Returns the block that stays (free it after).
char* FreedHeapBehindAPin() {
  constexpr size_t kBlock = 64 << 10, kBlocks = (96 << 20) / kBlock;
  std::vector<char*> blocks;
  for (size_t i = 0; i < kBlocks; ++i) {
    blocks.push_back(static_cast<char*>(std::malloc(kBlock)));
    std::memset(blocks.back(), 1, kBlock);
  }
  char* pin = static_cast<char*>(std::malloc(kBlock));
  std::memset(pin, 1, kBlock);
  for (char* b : blocks) std::free(b);
  return pin;
}

TEST(HeapTrim, ReturnsFreedHeapOnlyWhenEnoughIsFree) {
  char* pin = FreedHeapBehindAPin();
  const int64_t free_bytes = FreeHeapBytes();
  ASSERT_GE(free_bytes, 90 << 20) << "glibc reports " << free_bytes << " free heap bytes";

  const int64_t held = memory::ReadProcMemory().working_set_bytes;
  EXPECT_FALSE(ReturnFreedHeapToSystem(free_bytes + (64 << 20))) << "trimmed below its threshold";
  EXPECT_GT(memory::ReadProcMemory().working_set_bytes, held - (16 << 20)) << "memory went back without a trim";
  EXPECT_TRUE(ReturnFreedHeapToSystem(64 << 20));
  const int64_t returned = held - memory::ReadProcMemory().working_set_bytes;
  EXPECT_GT(returned, 80 << 20) << "the trim returned only " << returned << " bytes";
  std::free(pin);
}

// Before a recomputed block's backward the heap is trimmed when the end-of-step threshold
// of the limit last set (HeapTrimThreshold) or 4 of the block's hidden states are free,
// the smaller: with no limit known and a hidden state of 16 MiB, 64 MiB must be free; with
// one of 1 MiB, 4 MiB are enough, as under a 128 MiB limit (2 MiB), and the freed heap
// goes back.
TEST(HeapTrim, BeforeARecomputeTheThresholdFollowsTheLimitAndTheHiddenState) {
  SetHostLimitForHeapTrims(0);
  const bool enough_free = FreeHeapBytes() >= (64 << 20);
  EXPECT_EQ(ReturnFreedHeapBeforeRecompute(16 << 20), enough_free);

  char* pin = FreedHeapBehindAPin();
  int64_t held = memory::ReadProcMemory().working_set_bytes;
  EXPECT_TRUE(ReturnFreedHeapBeforeRecompute(1 << 20));
  int64_t returned = held - memory::ReadProcMemory().working_set_bytes;
  EXPECT_GT(returned, 80 << 20) << "the trim returned only " << returned << " bytes";
  std::free(pin);

  pin = FreedHeapBehindAPin();
  held = memory::ReadProcMemory().working_set_bytes;
  SetHostLimitForHeapTrims(int64_t{128} << 20);
  EXPECT_TRUE(ReturnFreedHeapBeforeRecompute(int64_t{1} << 30));
  returned = held - memory::ReadProcMemory().working_set_bytes;
  EXPECT_GT(returned, 80 << 20) << "the trim returned only " << returned << " bytes";
  SetHostLimitForHeapTrims(0);
  std::free(pin);
}

// DetectBlas names the library LibTorch's sgemm_ calls resolve to in this process
// (run it with LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blas to see netlib named).
TEST(BlasInfo, NamesTheBlasThatSgemmResolvesTo) {
  torch::mm(torch::ones({4, 4}), torch::ones({4, 4}));  // LibTorch and its BLAS are loaded
  const BlasInfo info = DetectBlas();
  ASSERT_FALSE(info.name.empty());
  const std::string path = BlasLibraryPath();
  std::printf("sgemm_ from %s: %s\n", path.c_str(), info.name.c_str());
  if (path.empty()) {
    EXPECT_EQ(info.name, "built into LibTorch");
  } else if (path.find("openblas") != std::string::npos) {
    EXPECT_EQ(info.name.rfind("OpenBLAS", 0), 0u) << info.name;
    EXPECT_FALSE(info.reference);
  } else if (path.find("/blas/") != std::string::npos) {
    EXPECT_TRUE(info.reference) << info.name;
    EXPECT_NE(info.name.find(path), std::string::npos) << info.name;
  }
}

}  // namespace
}  // namespace headroom::worker
