// Bf16Autocast's scope: the CUDA autocast state is per thread and needs no device, so the
// version-dependent calls (bf16_autocast.cc) run here on any build.
#include <gtest/gtest.h>

#include "worker/model/bf16_autocast.h"

namespace headroom::worker {
namespace {

const c10::Device kCuda(c10::DeviceType::CUDA, 0);

TEST(Bf16Autocast, EnablesBf16OnCudaAndRestoresThePreviousState) {
  ASSERT_FALSE(CudaAutocastEnabled());
  const c10::ScalarType before = CudaAutocastDtype();
  ASSERT_NE(before, c10::ScalarType::BFloat16);  // torch's default is fp16
  {
    Bf16Autocast scope(kCuda);
    EXPECT_TRUE(CudaAutocastEnabled());
    EXPECT_EQ(CudaAutocastDtype(), c10::ScalarType::BFloat16);
    {
      Bf16Autocast inner(kCuda);
      EXPECT_TRUE(CudaAutocastEnabled());
    }
    EXPECT_TRUE(CudaAutocastEnabled()) << "an inner scope's end must not end the outer one";
    EXPECT_EQ(CudaAutocastDtype(), c10::ScalarType::BFloat16);
  }
  EXPECT_FALSE(CudaAutocastEnabled());
  EXPECT_EQ(CudaAutocastDtype(), before);
}

TEST(Bf16Autocast, LeavesOtherDevicesInFp32) {
  Bf16Autocast scope(c10::Device(c10::DeviceType::CPU));
  EXPECT_FALSE(CudaAutocastEnabled());
  EXPECT_NE(CudaAutocastDtype(), c10::ScalarType::BFloat16);
}

}  // namespace
}  // namespace headroom::worker
