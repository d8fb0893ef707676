// Safetensors files a hostile or broken export may hand us: overlapping data_offsets (the
// format forbids them) are refused naming both tensors, a header length above the limit is
// refused unread, a FIFO is refused instead of blocking, and non-finite weights are named.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/hf/safetensors.h"
#include "tests/helpers/temp_dir.h"

namespace headroom::hf {
namespace {

using headroom::testing::TempDir;

// A safetensors file with this header (as JSON text) and `data_bytes` zero bytes of data.
std::string WriteRaw(const TempDir& dir, const std::string& header, size_t data_bytes) {
  const std::string path = dir.path() + "/model.safetensors";
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header << std::string(data_bytes, '\0');
  return path;
}

std::string MessageOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const SafetensorsError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SafetensorsFile, OverlappingDataOffsetsAreRefusedNamingBothTensors) {
  TempDir dir;
  const nlohmann::json header = {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}},
                                 {"b", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {16, 32}}}},
                                 {"c", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {24, 32}}}},  // inside b
                                 {"empty", {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {8, 8}}}}};
  const std::string path = WriteRaw(dir, header.dump(), 32);
  EXPECT_EQ(MessageOf([&] { SafetensorsFile f(path); }),
            path + ": tensors b [16, 32] and c [24, 32]: data_offsets overlap (each tensor must have its own bytes)");
  // Adjacent tensors and an empty one sharing an offset are fine.
  const nlohmann::json fine = {{"a", header["a"]}, {"b", header["b"]}, {"empty", header["empty"]}};
  SafetensorsFile f(WriteRaw(dir, fine.dump(), 32));
  EXPECT_EQ(f.tensors().size(), 3u);
}

TEST(SafetensorsFile, AHeaderAboveTheLimitIsRefusedUnread) {
  TempDir dir;
  const std::string path = dir.path() + "/model.safetensors";
  {
    std::ofstream out(path, std::ios::binary);
    const uint64_t n = kMaxHeaderBytes + 1;
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  }
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(kMaxHeaderBytes) * 2), 0);  // sparse
  EXPECT_EQ(MessageOf([&] { SafetensorsFile f(path); }),
            path + ": header length 100000001 is above the limit of 100000000 bytes");
}

TEST(SafetensorsFile, AFifoIsRefusedNotWaitedOn) {
  TempDir dir;
  const std::string fifo = dir.path() + "/model.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(MessageOf([&] { SafetensorsFile f(fifo); }), fifo + ": is a FIFO, expected a safetensors file");
  EXPECT_EQ(MessageOf([&] { SafetensorsModel m(dir.path()); }), fifo + ": is a FIFO, expected a safetensors file");
}

TEST(SafetensorsFile, AnOverflowingShapeIsRefused) {
  TempDir dir;
  const nlohmann::json header = {
      {"w", {{"dtype", "F32"}, {"shape", {int64_t{1} << 32, int64_t{1} << 32, 16}}, {"data_offsets", {0, 0}}}}};
  const std::string path = WriteRaw(dir, header.dump(), 0);
  EXPECT_NE(MessageOf([&] { SafetensorsFile f(path); }).find("tensor w: shape [4294967296,4294967296,16] is too large"),
            std::string::npos);
}

template <typename T>
TensorView ViewOf(const std::vector<T>& values, const std::string& dtype) {
  TensorView v;
  v.dtype = dtype;
  v.shape = {static_cast<int64_t>(values.size())};
  v.data = reinterpret_cast<const std::byte*>(values.data());
  v.bytes = values.size() * sizeof(T);
  v.file = "/m/model.safetensors";
  return v;
}

TEST(RequireFinite, NamesTheTensorAndTheFirstNonFiniteElement) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_NO_THROW(RequireFinite(ViewOf(std::vector<float>{1, -2, 3e38f, 0}, "F32"), "w"));
  EXPECT_EQ(MessageOf([&] {
              RequireFinite(ViewOf(std::vector<float>{1, 2, nan}, "F32"), "model.norm.weight");
            }),
            "/m/model.safetensors: tensor model.norm.weight holds NaN (element 2): the weights must be finite");
  EXPECT_EQ(MessageOf([&] { RequireFinite(ViewOf(std::vector<float>{-inf}, "F32"), "w"); }),
            "/m/model.safetensors: tensor w holds an infinity (element 0): the weights must be finite");
  EXPECT_NO_THROW(RequireFinite(ViewOf(std::vector<double>{1e300}, "F64"), "w"));
  EXPECT_THROW(RequireFinite(ViewOf(std::vector<double>{std::nan("")}, "F64"), "w"), SafetensorsError);
  // bf16 and fp16 bit patterns: 1.0, then NaN / infinity.
  EXPECT_NO_THROW(RequireFinite(ViewOf(std::vector<uint16_t>{0x3F80, 0xFF7F}, "BF16"), "w"));  // 1, -max
  EXPECT_THROW(RequireFinite(ViewOf(std::vector<uint16_t>{0x3F80, 0x7FC0}, "BF16"), "w"), SafetensorsError);
  EXPECT_NO_THROW(RequireFinite(ViewOf(std::vector<uint16_t>{0x3C00, 0x7BFF}, "F16"), "w"));  // 1, max
  EXPECT_EQ(MessageOf([&] {
              RequireFinite(ViewOf(std::vector<uint16_t>{0x3C00, 0xFC00}, "F16"), "w");
            }),
            "/m/model.safetensors: tensor w holds an infinity (element 1): the weights must be finite");
  // Integer tensors have no non-finite values: 0xFFFF is just a number.
  EXPECT_NO_THROW(RequireFinite(ViewOf(std::vector<uint16_t>{0xFFFF}, "I16"), "w"));
}

}  // namespace
}  // namespace headroom::hf
