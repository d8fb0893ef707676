// What `headroom run` shows while a spec.model.hub model downloads before the first step:
// the plain lines of a pipe (one per tenth of the bytes) and the terminal's block.
#include "local/progress_view.h"

#include <gtest/gtest.h>

#include <sstream>

namespace headroom::local {
namespace {

runtime::JobStatus Fetching(int64_t done, int64_t total) {
  runtime::JobStatus s;
  s.phase = runtime::JobPhase::kRunning;
  s.generation = 1;
  s.workers = 1;
  s.total_steps = 4;
  s.model_fetch = protocol::ModelFetchRecord{"org/name", "main", "model.safetensors", done, total};
  return s;
}

TEST(ProgressView, APipeGetsALinePerTenthOfTheModelDownload) {
  std::ostringstream out;
  ProgressView view(out, /*terminal=*/false, "job");
  const int64_t total = 10LL << 20;
  view.Update(Fetching(1LL << 20, total), {});
  view.Update(Fetching((1LL << 20) + 4096, total), {});  // the same tenth: no new line
  view.Update(Fetching(total, total), {});
  EXPECT_EQ(out.str(), "fetching model org/name@main: 1 MiB of 10 MiB (model.safetensors)\n"
                       "fetched model org/name@main: 10 MiB of 10 MiB\n");
}

TEST(ProgressView, TheTerminalBlockShowsTheDownloadUntilTheFirstStep) {
  std::ostringstream out;
  ProgressView view(out, /*terminal=*/true, "job");
  view.Update(Fetching(3LL << 20, 10LL << 20), {});
  EXPECT_NE(out.str().find("fetching model org/name@main: 3 MiB of 10 MiB (model.safetensors)"), std::string::npos)
      << out.str();
  protocol::StepRecord step;
  step.step = 1;
  step.generation = 1;
  runtime::JobStatus s = Fetching(10LL << 20, 10LL << 20);
  s.step = 1;
  out.str("");
  view.Update(s, {step});
  EXPECT_EQ(out.str().find("model org/name"), std::string::npos) << "steps replace the download: " << out.str();
}

}  // namespace
}  // namespace headroom::local
