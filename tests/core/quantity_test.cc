// Kubernetes quantities: the cases are k8s.io/apimachinery's own TestQuantityParse table
// (value as decQuantity(v, scale): v units of 10^scale), plus the spec's byte/millicore uses.
#include "core/spec/quantity.h"

#include <gtest/gtest.h>

#include <limits>

namespace headroom::spec {
namespace {

struct ParseCase {
  const char* input;
  int64_t value;  // in units of 10^scale
  int scale;
  QuantityFormat format;
};

constexpr auto kDec = QuantityFormat::kDecimalSI;
constexpr auto kBin = QuantityFormat::kBinarySI;
constexpr auto kExp = QuantityFormat::kDecimalExponent;

class KubernetesParseTable : public testing::TestWithParam<ParseCase> {};

TEST_P(KubernetesParseTable, ParsesLikeApimachinery) {
  const ParseCase& c = GetParam();
  for (const std::string sign : {"", "+", "-"}) {
    const std::string input = sign + c.input;
    std::string error;
    std::optional<Quantity> q = Quantity::Parse(input, &error);
    ASSERT_TRUE(q.has_value()) << input << ": " << error;
    const int64_t expected = sign == "-" ? -c.value : c.value;
    EXPECT_EQ(q->ScaledValue(c.scale), expected) << input;
    // Exact at that scale: one digit finer is ten times as many units.
    if (c.value < std::numeric_limits<int64_t>::max() / 10) {
      EXPECT_EQ(q->ScaledValue(c.scale - 1), expected * 10) << input;
    }
    EXPECT_EQ(q->format(), c.format) << input;
    EXPECT_EQ(q->text(), input);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Quantity, KubernetesParseTable,
    testing::Values(
        // Zeroes
        ParseCase{"0", 0, 0, kDec}, ParseCase{"0n", 0, 0, kDec}, ParseCase{"0u", 0, 0, kDec},
        ParseCase{"0m", 0, 0, kDec}, ParseCase{"0Ki", 0, 0, kBin}, ParseCase{"0k", 0, 0, kDec},
        ParseCase{"0Mi", 0, 0, kBin}, ParseCase{"0M", 0, 0, kDec}, ParseCase{"0Gi", 0, 0, kBin},
        ParseCase{"0G", 0, 0, kDec}, ParseCase{"0Ti", 0, 0, kBin}, ParseCase{"0T", 0, 0, kDec},
        // Binary suffixes
        ParseCase{"1Ki", 1024, 0, kBin}, ParseCase{"8Ki", 8 * 1024, 0, kBin}, ParseCase{"7Mi", 7LL << 20, 0, kBin},
        ParseCase{"6Gi", 6LL << 30, 0, kBin}, ParseCase{"5Ti", 5LL << 40, 0, kBin},
        ParseCase{"4Pi", 4LL << 50, 0, kBin}, ParseCase{"3Ei", 3LL << 60, 0, kBin},
        ParseCase{"10Ti", 10LL << 40, 0, kBin}, ParseCase{"100Ti", 100LL << 40, 0, kBin},
        // Decimal suffixes
        ParseCase{"5n", 5, -9, kDec}, ParseCase{"4u", 4, -6, kDec}, ParseCase{"3m", 3, -3, kDec},
        ParseCase{"9", 9, 0, kDec}, ParseCase{"8k", 8, 3, kDec}, ParseCase{"50k", 5, 4, kDec},
        ParseCase{"7M", 7, 6, kDec}, ParseCase{"6G", 6, 9, kDec}, ParseCase{"5T", 5, 12, kDec},
        ParseCase{"40T", 4, 13, kDec}, ParseCase{"300T", 3, 14, kDec}, ParseCase{"2P", 2, 15, kDec},
        ParseCase{"1E", 1, 18, kDec},
        // Decimal exponents
        ParseCase{"1E-3", 1, -3, kExp}, ParseCase{"1e3", 1, 3, kExp}, ParseCase{"1E6", 1, 6, kExp},
        ParseCase{"1e9", 1, 9, kExp}, ParseCase{"1E12", 1, 12, kExp}, ParseCase{"1e15", 1, 15, kExp},
        ParseCase{"1E18", 1, 18, kExp}, ParseCase{"1e14", 1, 14, kExp}, ParseCase{"1e13", 1, 13, kExp},
        ParseCase{"100.035k", 100035, 0, kDec},
        // Things that look like floating point
        ParseCase{"0.001", 1, -3, kDec}, ParseCase{"0.0005k", 5, -1, kDec}, ParseCase{"0.005", 5, -3, kDec},
        ParseCase{"0.05", 5, -2, kDec}, ParseCase{"0.5", 5, -1, kDec}, ParseCase{"0.00050k", 5, -1, kDec},
        ParseCase{"0.00500", 5, -3, kDec}, ParseCase{"0.05000", 5, -2, kDec}, ParseCase{"0.50000", 5, -1, kDec},
        ParseCase{"0.5e0", 5, -1, kExp}, ParseCase{"0.5e-1", 5, -2, kExp}, ParseCase{"0.5e-2", 5, -3, kExp},
        ParseCase{"10.035M", 10035, 3, kDec}, ParseCase{"1.2e3", 12, 2, kExp}, ParseCase{"1.3E+6", 13, 5, kExp},
        ParseCase{"1.40e9", 14, 8, kExp}, ParseCase{"1.53E12", 153, 10, kExp}, ParseCase{"1.6e15", 16, 14, kExp},
        ParseCase{"1.7E18", 17, 17, kExp}, ParseCase{"9.01", 901, -2, kDec}, ParseCase{"8.1k", 81, 2, kDec},
        ParseCase{"7.123456M", 7123456, 0, kDec}, ParseCase{"6.987654321G", 6987654321, 0, kDec},
        ParseCase{"5.444T", 5444, 9, kDec}, ParseCase{"40.1T", 401, 11, kDec}, ParseCase{"300.2T", 3002, 11, kDec},
        ParseCase{"2.5P", 25, 14, kDec}, ParseCase{"1.01E", 101, 16, kDec}, ParseCase{"12E", 12, 18, kDec},
        // Fractional binary
        ParseCase{"100.035Ki", 10243584, -2, kBin}, ParseCase{"0.5Mi", 524288, 0, kBin},
        ParseCase{"0.05Gi", 536870912, -1, kBin}, ParseCase{"0.025Ti", 274877906944, -1, kBin},
        // Things written by trolls
        ParseCase{".001", 1, -3, kDec}, ParseCase{".0001k", 100, -3, kDec}, ParseCase{"1.", 1, 0, kDec},
        ParseCase{"1.G", 1, 9, kDec}));

// Kubernetes rounds to nano units, up (away from zero): these are its "round" cases,
// exact only at scale -9, so they are checked there alone.
TEST(Quantity, RoundsUpToNanoLikeKubernetes) {
  const struct {
    const char* input;
    int64_t nanos;
  } cases[] = {
      {"3.001n", 4}, {"1.1E-9", 2}, {"0.0000000001", 1},    {"0.0000000005", 1},    {"0.00000000050", 1},
      {"0.5e-9", 1}, {"0.9n", 1},   {"0.00000012345", 124}, {"0.00000012354", 124}, {"0.000000000001Ki", 2},
  };
  for (const auto& c : cases) {
    std::optional<Quantity> q = Quantity::Parse(c.input);
    ASSERT_TRUE(q) << c.input;
    EXPECT_EQ(q->ScaledValue(-9), c.nanos) << c.input;
  }
}

TEST(Quantity, RejectsWhatKubernetesRejects) {
  for (const char* bad : {// apimachinery's own invalid table
                          "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", " 1", "1 ",
                          // the spec's examples of bad forms
                          "1.5.5", "Gi", "1 Gi", "1gi", "1KB", "1K", "1ki", "1KI", "1KiB", "1Zi", "1Z",
                          // numbers missing, exponents malformed, foreign syntax
                          "", "+", "-", ".", "e3", "1e", "1e+", "1e1.5", "1e3k", "1E3Ki", "1e+-3", "1..5", "1-", "++1",
                          "1,5", "1_000", "0x10", "1/2", "Inf", "NaN", "1e99999999999999999999"}) {
    std::string error;
    EXPECT_FALSE(Quantity::Parse(bad, &error)) << "\"" << bad << "\" parsed";
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(Quantity, ValueAndMilliValueRoundUpAwayFromZero) {
  EXPECT_EQ(Quantity::Parse("1.1")->Value(), 2);
  EXPECT_EQ(Quantity::Parse("-9.01")->Value(), -10);
  EXPECT_EQ(Quantity::Parse("0.1m")->MilliValue(), 1);
  EXPECT_EQ(Quantity::Parse("500m")->MilliValue(), 500);
  EXPECT_EQ(Quantity::Parse("500m")->Value(), 1);
  EXPECT_EQ(Quantity::Parse("1n")->MilliValue(), 1);
  EXPECT_EQ(Quantity::Parse("2")->MilliValue(), 2000);
  EXPECT_EQ(Quantity::Parse("1.5")->MilliValue(), 1500);
  EXPECT_EQ(Quantity::Parse("100m")->Value(), 1);  // "100m" bytes is a tenth of a byte
}

TEST(Quantity, MemoryInBytes) {
  EXPECT_EQ(ParseQuantityBytes("4Gi"), 4LL << 30);
  EXPECT_EQ(ParseQuantityBytes("512Mi"), 512LL << 20);
  EXPECT_EQ(ParseQuantityBytes("1.5G"), 1500000000);
  EXPECT_EQ(ParseQuantityBytes("0.5Gi"), 1LL << 29);
  EXPECT_EQ(ParseQuantityBytes("1e3"), 1000);
  EXPECT_EQ(ParseQuantityBytes("1E3"), 1000);
  EXPECT_EQ(ParseQuantityBytes("48Mi"), 48LL << 20);
  EXPECT_EQ(ParseQuantityBytes("-1Ki"), -1024);
  EXPECT_EQ(ParseQuantityBytes("7Ei"), 7LL << 60);
  EXPECT_EQ(ParseQuantityBytes("9223372036854775807"), std::numeric_limits<int64_t>::max());
}

TEST(Quantity, CpuInMillicores) {
  EXPECT_EQ(ParseQuantityMillis("500m"), 500);
  EXPECT_EQ(ParseQuantityMillis("2"), 2000);
  EXPECT_EQ(ParseQuantityMillis("0.25"), 250);
  EXPECT_EQ(ParseQuantityMillis("1k"), 1000000);
}

// Where Kubernetes would wrap or saturate silently, we say the value is out of range.
TEST(Quantity, ReportsOutOfRangeInsteadOfWrapping) {
  std::string error;
  EXPECT_FALSE(ParseQuantityBytes("9Ei", &error));
  EXPECT_NE(error.find("too large"), std::string::npos) << error;
  EXPECT_FALSE(ParseQuantityBytes("9223372036854775808"));
  EXPECT_FALSE(ParseQuantityBytes("100E"));
  EXPECT_FALSE(ParseQuantityMillis("9223372036854775807"));
  EXPECT_FALSE(ParseQuantityBytes("1e9223372036854775807"));
  // Huge exponents on zero, and tiny ones on anything, stay well defined.
  EXPECT_EQ(ParseQuantityBytes("0e9223372036854775807"), 0);
  EXPECT_EQ(ParseQuantityBytes("1e-9223372036854775808"), 1);
  EXPECT_EQ(ParseQuantityBytes("-1e-9223372036854775808"), -1);
}

TEST(Quantity, ErrorsSayWhatIsWrong) {
  std::string error;
  Quantity::Parse("4GB", &error);
  EXPECT_NE(error.find("unknown suffix \"GB\""), std::string::npos) << error;
  Quantity::Parse("1 Gi", &error);
  EXPECT_NE(error.find("spaces"), std::string::npos) << error;
  Quantity::Parse("Gi", &error);
  EXPECT_NE(error.find("start with a number"), std::string::npos) << error;
  Quantity::Parse(std::string(200, '1'), &error);
  EXPECT_NE(error.find("longer than"), std::string::npos) << error;
}

}  // namespace
}  // namespace headroom::spec
