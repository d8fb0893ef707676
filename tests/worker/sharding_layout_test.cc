// FlatLayout: padding to the world size, owned ranges that tile the buffer, bad input.
#include <spdlog/spdlog.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/worker/helpers/sharding_fixture.h"
#include "worker/sharding/flat_layout.h"

namespace headroom::worker {
namespace {

TEST(FlatLayoutTest, PadsToWorldAndTilesRanges) {
  const auto params = headroom::testing::MakeOddParams(1);
  FlatLayout layout(params, 3);
  EXPECT_EQ(layout.numel(), 53);
  EXPECT_EQ(layout.padded_numel(), 54);
  EXPECT_EQ(layout.shard_numel(), 18);
  EXPECT_EQ(layout.slots()[2].offset, 38);
  int64_t covered = 0;
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(layout.Shard(r).begin, covered);
    covered = layout.Shard(r).end;
  }
  EXPECT_EQ(covered, 54);
  EXPECT_EQ(FlatLayout(params, 1).padded_numel(), 53);
  EXPECT_THROW(layout.Shard(3), std::out_of_range);
  EXPECT_THROW(FlatLayout(params, 0), std::invalid_argument);
  auto twice = params;
  twice.push_back(params[0]);
  EXPECT_THROW(FlatLayout(twice, 2), std::invalid_argument);
  EXPECT_TRUE(Intersect({0, 5}, {7, 9}).empty());
  EXPECT_EQ(Intersect({0, 8}, {5, 9}).numel(), 3);
}

}  // namespace
}  // namespace headroom::worker
