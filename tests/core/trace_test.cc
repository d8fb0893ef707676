// Trace CSV: what `headroom replay` reads. Malformed input names the line and column.
#include <gtest/gtest.h>

#include <string>

#include "core/guard/trace.h"

namespace headroom::guard {
namespace {

std::string ErrorOf(const std::string& csv) {
  try {
    ParseTrace(csv, "t.csv");
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}

TEST(TraceTest, ParsesRequiredAndOptionalColumnsInAnyOrder) {
  auto steps = ParseTrace("# a comment\n"
                          "gpu_bytes,step,host_bytes,tokens,host_limit_bytes\n"
                          "\n"
                          "5,0,100,64,1000\n"
                          " 6 , 1 , 110 , 70 , 1000 \n");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[1].step, 1);
  EXPECT_EQ(steps[1].host_bytes, 110);
  EXPECT_EQ(steps[1].gpu_bytes, 6);
  EXPECT_EQ(steps[1].tokens, 70);
  EXPECT_EQ(steps[1].host_limit_bytes, 1000);
  EXPECT_EQ(steps[1].host_peak_bytes, 0);  // absent column: unknown
}

TEST(TraceTest, FormatRoundTrips) {
  std::vector<StepMemory> in(2);
  in[0] = {0, 100, 200, 150, 250, 64, 1000, 2000};
  in[1] = {3, 101, 201, 151, 251, 65, 1000, 2000};
  auto out = ParseTrace(FormatTrace(in));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].step, 3);
  EXPECT_EQ(out[1].gpu_peak_bytes, 251);
  EXPECT_EQ(out[0].gpu_limit_bytes, 2000);
}

TEST(TraceTest, ErrorsNameLineAndColumn) {
  EXPECT_EQ(ErrorOf("step,host_bytes,gpu_bytes\n0,1,2\n1,12x,3\n"),
            "t.csv:3: column host_bytes: not an integer: '12x'");
  EXPECT_EQ(ErrorOf("step,host_bytes,gpu_bytes\n0,1\n"), "t.csv:2: expected 3 columns, got 2");
  EXPECT_EQ(ErrorOf("step,host_bytes,gpu_bytes\n0,1,-2\n"), "t.csv:2: column gpu_bytes: must be >= 0, got -2");
  EXPECT_EQ(ErrorOf("step,host_bytes,gpu_bytes\n0,1,2\n,1,2\n"), "t.csv:3: column step: not an integer: ''");
  EXPECT_EQ(ErrorOf("step,host_bytes,gpu_bytes\n2,1,2\n2,1,2\n"),
            "t.csv:3: column step: steps must increase, got 2 after 2");
  EXPECT_NE(ErrorOf("step,host_byte,gpu_bytes\n").find("t.csv:1: unknown column 'host_byte'"), std::string::npos);
  EXPECT_EQ(ErrorOf("step,gpu_bytes\n"), "t.csv:1: header lacks the required column 'host_bytes'");
  EXPECT_EQ(ErrorOf("step,host_bytes,gpu_bytes,step\n"), "t.csv:1: column 'step' appears twice");
  EXPECT_EQ(ErrorOf("# only a comment\n"), "t.csv: empty trace (no header row)");
}

TEST(TraceTest, MissingFileIsAnError) { EXPECT_THROW(ReadTraceFile("/nonexistent/trace.csv"), TraceError); }

}  // namespace
}  // namespace headroom::guard
