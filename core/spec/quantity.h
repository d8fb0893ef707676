// Kubernetes resource quantities ("4Gi", "512Mi", "1.5G", "500m", "1e3"), parsed the way
// k8s.io/apimachinery's resource.ParseQuantity parses them.
//
// Grammar (the intersection of ParseQuantity and the OpenAPI pattern the API server
// applies to int-or-string quantity fields, so a string accepted here is accepted there):
//
//   quantity ::= sign? number suffix?
//   sign     ::= "+" | "-"
//   number   ::= digits | digits "." digits? | "." digits        (at least one digit)
//   suffix   ::= binarySI | decimalSI | ("e" | "E") sign? digits
//   binarySI ::= Ki | Mi | Gi | Ti | Pi | Ei                     (2^10 .. 2^60)
//   decimalSI::= n | u | m | k | M | G | T | P | E               (1e-9 .. 1e18)
//
// Case matters ("1k" is 1000, "1K", "1ki", "1KB" are errors); no whitespace anywhere.
// Value() and MilliValue() round up, away from zero, as Quantity.Value()/MilliValue() do:
// "1.1" is 2 bytes, "0.1m" is 1 millicore, "-9.01" is -10. Where Kubernetes would
// silently wrap (values beyond int64, exponents beyond int32) we report an error instead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace headroom::spec {

enum class QuantityFormat { kDecimalSI, kBinarySI, kDecimalExponent };

class Quantity {
 public:
  // Longest text accepted; no real quantity comes close, and it bounds the arithmetic.
  static constexpr size_t kMaxLength = 128;

  // Parses `text`; on failure returns nullopt and, when `error` is non-null, says why
  // (e.g. `unknown suffix "KB" (use k, M, G, ... or Ki, Mi, Gi, ...)`).
  static std::optional<Quantity> Parse(std::string_view text, std::string* error = nullptr);

  // The value in units of 10^scale (Quantity.ScaledValue): ScaledValue(-9) is nano units.
  // Rounded up, away from zero; nullopt when beyond int64.
  std::optional<int64_t> ScaledValue(int scale) const;
  // The value in base units (bytes, cores), rounded up; nullopt when beyond int64.
  std::optional<int64_t> Value() const { return ScaledValue(0); }
  // The value in thousandths (millicores), rounded up; nullopt when beyond int64.
  std::optional<int64_t> MilliValue() const { return ScaledValue(-3); }

  const std::string& text() const { return text_; }  // as written
  QuantityFormat format() const { return format_; }
  bool negative() const { return negative_ && !zero(); }
  bool zero() const { return digits_.empty(); }

 private:
  Quantity() = default;

  std::string text_;
  bool negative_ = false;
  // |value| = digits_ * 10^decimal_exponent_ * 2^binary_exponent_, digits_ without
  // leading zeros ("" for zero).
  std::string digits_;
  int64_t decimal_exponent_ = 0;
  int binary_exponent_ = 0;
  QuantityFormat format_ = QuantityFormat::kDecimalSI;
};

// Convenience for spec fields: bytes (Value) and millicores (MilliValue). Return nullopt
// and set `error` for malformed or out-of-range text.
std::optional<int64_t> ParseQuantityBytes(std::string_view text, std::string* error = nullptr);
std::optional<int64_t> ParseQuantityMillis(std::string_view text, std::string* error = nullptr);

}  // namespace headroom::spec
