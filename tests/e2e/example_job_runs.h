// Test support for the e2e tests that run the example text job (configs/addition-text-
// qwen2.yaml, a few steps) with the real headroom and headroom-worker binaries: writing
// the job, running `headroom run` or one worker, and reading what the checkpoints hold.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "tests/local/local_test_support.h"

namespace headroom::e2e {

inline const std::string kBin = std::string(HEADROOM_BINARY_DIR) + "/bin";
inline const std::string kSource = HEADROOM_SOURCE_DIR;

using headroom::local::testing::ReadAll;

// Why these tests cannot run here ("" when they can): no binaries or no example weights.
inline std::string Unrunnable() {
  for (const char* bin : {"headroom", "headroom-worker"}) {
    if (access((kBin + "/" + bin).c_str(), X_OK) != 0) return "no " + kBin + "/" + bin + " (build it)";
  }
  if (!std::filesystem::exists(kSource + "/configs/models/qwen2-tiny-addition/model.safetensors")) {
    return "no example model weights";
  }
  return "";
}

// The example job, `steps` long with a checkpoint every step, paths absolute; `train` is
// its training set.
inline std::string WriteJob(const std::string& dir, int steps, const std::string& train) {
  std::string job = ReadAll(kSource + "/configs/addition-text-qwen2.yaml");
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"steps: 150", "steps: " + std::to_string(steps)},
        {"everySteps: 50", "everySteps: 1"},
        {"configs/models/", kSource + "/configs/models/"},
        {"configs/data/addition-text/train.jsonl", train},
        {"configs/data/addition-text/heldout", kSource + "/configs/data/addition-text/heldout"}}) {
    if (job.find(from) == std::string::npos) ADD_FAILURE() << from << " not in the example job";
    for (size_t at = job.find(from); at != std::string::npos; at = job.find(from, at + to.size())) {
      job.replace(at, from.size(), to);
    }
  }
  const std::string path = dir + "/job.yaml";
  std::ofstream(path) << job;
  return path;
}

inline std::string Train() { return kSource + "/configs/data/addition-text/train.jsonl"; }

struct RunResult {
  int exit_code = -1;  // 128 + N for a process killed by signal N
  std::string output;
};

// `command` through the shell, its stdout and stderr in `out_path`; `env` prefixes it.
inline RunResult RunCommand(const std::string& command, const std::string& out_path, const std::string& env = "") {
  const std::string cmd = env + " " + command + " > " + out_path + " 2>&1";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), ReadAll(out_path)};
}

inline RunResult HeadroomRun(const std::string& job, const std::string& workdir, const std::string& flags = "") {
  return RunCommand(kBin + "/headroom run " + job + " --workdir " + workdir + " " + flags, workdir + ".out");
}

// Every checkpoint file with its size and modification time (the export left out).
inline std::map<std::string, std::pair<uintmax_t, std::filesystem::file_time_type>> Checkpoints(
    const std::string& dir) {
  std::map<std::string, std::pair<uintmax_t, std::filesystem::file_time_type>> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string rel = std::filesystem::relative(e.path(), dir).string();
    if (e.is_regular_file() && rel.rfind("hf-export", 0) != 0) files[rel] = {e.file_size(), e.last_write_time()};
  }
  return files;
}

// The steps a worker's step log (--log) records.
inline std::set<int64_t> LoggedSteps(const std::string& log_path) {
  std::set<int64_t> steps;
  std::istringstream in(ReadAll(log_path));
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step")) steps.insert(j["step"].get<int64_t>());
  }
  return steps;
}

// Entries of `dir` whose name ends in ".partial": what an interrupted write left.
inline std::vector<std::string> PartialEntries(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() >= 8 && name.compare(name.size() - 8, 8, ".partial") == 0) found.push_back(name);
  }
  return found;
}

}  // namespace headroom::e2e
