// headroom-test-apiserver: the in-process test API server (tests/operator/testserver/) as
// a process of its own, so real clients (kubectl) can be pointed at it. Optionally the
// TrainingJob controller runs inside it (pods appear for the jobs applied) and the test
// kubelet (pods run as local processes).
//
//   headroom-test-apiserver [--port N] [--operator] [--kubelet] [--url-file PATH]
//
// Plain HTTP on 127.0.0.1. Prints the URL on stdout (and writes it to --url-file once it
// is serving); runs until SIGTERM or SIGINT. Bad flags: one line naming the flag, exit 2.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "operator/kubeclient/rest_client.h"
#include "operator/trainingjob/controller.h"
#include "tests/operator/testserver/api_server.h"
#include "tests/operator/testserver/test_kubelet.h"

using namespace headroom;

namespace {

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "headroom-test-apiserver: %s\n"
               "usage: headroom-test-apiserver [--port N] [--operator] [--kubelet] [--url-file PATH]\n",
               why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  testserver::TestApiServerOptions options;
  bool run_operator = false;
  bool run_kubelet = false;
  std::string url_file;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--port") {
      const char* v = value();
      char* end = nullptr;
      const long port = v ? std::strtol(v, &end, 10) : -1;
      if (!v || *end != '\0' || port < 0 || port > 65535) return Usage("--port: expected a port number 0-65535");
      options.port = static_cast<int>(port);
    } else if (arg == "--operator") {
      run_operator = true;
    } else if (arg == "--kubelet") {
      run_kubelet = true;
    } else if (arg == "--url-file") {
      const char* v = value();
      if (!v) return Usage("--url-file: expected a path");
      url_file = v;
    } else if (arg == "--help" || arg == "-h") {
      std::printf("usage: headroom-test-apiserver [--port N] [--operator] [--kubelet] [--url-file PATH]\n");
      return 0;
    } else {
      return Usage("unknown flag " + arg);
    }
  }

  // Signals are taken by sigwait below, in this thread only.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  testserver::TestApiServer server(options);
  try {
    server.Start();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headroom-test-apiserver: %s\n", e.what());
    return 1;
  }
  std::unique_ptr<kubeclient::RestClient> client;
  std::unique_ptr<trainingjob::TrainingJobController> controller;
  if (run_operator) {
    client = std::make_unique<kubeclient::RestClient>(server.ClientConfig("default"));
    trainingjob::TrainingJobControllerOptions o;
    o.ns = "";  // every namespace, as the deployed operator
    controller = std::make_unique<trainingjob::TrainingJobController>(*client, o, nullptr);
    controller->StartInformers();
    if (!controller->WaitForSync(std::chrono::seconds(10))) {
      std::fprintf(stderr, "headroom-test-apiserver: the operator's informers did not sync\n");
      return 1;
    }
    controller->StartReconciling();
  }
  std::unique_ptr<testserver::TestKubelet> kubelet;
  if (run_kubelet) {
    kubelet = std::make_unique<testserver::TestKubelet>(server.ClientConfig(""), testserver::TestKubelet::Options{});
    kubelet->Start();
  }
  std::printf("%s\n", server.url().c_str());
  std::fflush(stdout);
  if (!url_file.empty()) {
    // Written whole under another name, then renamed: a reader never sees half a URL.
    const std::string tmp = url_file + ".tmp";
    std::ofstream(tmp) << server.url() << "\n";
    std::rename(tmp.c_str(), url_file.c_str());
  }
  int signal = 0;
  sigwait(&stop_signals, &signal);
  spdlog::info("headroom-test-apiserver: signal {}, stopping", signal);
  if (kubelet) kubelet->Stop();
  if (controller) controller->Stop(std::chrono::seconds(5));
  server.Stop();
  return 0;
}
