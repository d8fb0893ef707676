#include "core/spec/quantity.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

namespace headroom::spec {
namespace {

constexpr int64_t kExponentClamp = int64_t{1} << 40;  // beyond this only 0/1/overflow remain

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

void SetError(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
}

struct Suffix {
  QuantityFormat format;
  int64_t decimal_exponent;
  int binary_exponent;
};

std::optional<Suffix> DecimalOrBinarySuffix(std::string_view s) {
  static constexpr struct {
    const char* name;
    int decimal;
    int binary;
  } kTable[] = {
      {"", 0, 0},    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},
      {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},  {"Ki", 0, 10}, {"Mi", 0, 20},
      {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
  };
  for (const auto& e : kTable) {
    if (s == e.name) {
      return Suffix{e.binary != 0 ? QuantityFormat::kBinarySI : QuantityFormat::kDecimalSI, e.decimal, e.binary};
    }
  }
  return std::nullopt;
}

// Multiplies a decimal digit string by two, in place.
void DoubleDigits(std::string& digits) {
  int carry = 0;
  for (size_t i = digits.size(); i-- > 0;) {
    int d = (digits[i] - '0') * 2 + carry;
    digits[i] = static_cast<char>('0' + d % 10);
    carry = d / 10;
  }
  if (carry != 0) digits.insert(digits.begin(), static_cast<char>('0' + carry));
}

}  // namespace

std::optional<Quantity> Quantity::Parse(std::string_view text, std::string* error) {
  if (text.empty()) {
    SetError(error, "empty quantity");
    return std::nullopt;
  }
  if (text.size() > kMaxLength) {
    SetError(error, "quantity longer than " + std::to_string(kMaxLength) + " characters");
    return std::nullopt;
  }
  if (std::any_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); })) {
    SetError(error, "quantity must not contain spaces");
    return std::nullopt;
  }
  Quantity q;
  q.text_ = std::string(text);
  size_t pos = 0;
  if (text[pos] == '+' || text[pos] == '-') {
    q.negative_ = text[pos] == '-';
    ++pos;
  }
  const size_t int_start = pos;
  while (pos < text.size() && IsDigit(text[pos])) ++pos;
  std::string_view int_part = text.substr(int_start, pos - int_start);
  std::string_view frac_part;
  if (pos < text.size() && text[pos] == '.') {
    const size_t frac_start = ++pos;
    while (pos < text.size() && IsDigit(text[pos])) ++pos;
    frac_part = text.substr(frac_start, pos - frac_start);
  }
  if (int_part.empty() && frac_part.empty()) {
    SetError(error, "quantity must start with a number (like 4Gi, 512Mi, 1.5G, 500m)");
    return std::nullopt;
  }

  const std::string_view suffix_text = text.substr(pos);
  std::optional<Suffix> suffix = DecimalOrBinarySuffix(suffix_text);
  if (!suffix && suffix_text.size() > 1 && (suffix_text[0] == 'e' || suffix_text[0] == 'E')) {
    // Decimal exponent: e/E, optional sign, digits (strconv.ParseInt's int64 syntax).
    std::string_view exp = suffix_text.substr(1);
    const bool has_sign = exp[0] == '+' || exp[0] == '-';
    const std::string_view exp_digits = exp.substr(has_sign ? 1 : 0);
    if (exp[0] == '+') exp.remove_prefix(1);  // from_chars takes '-' but not '+'

    if (!exp_digits.empty() && std::all_of(exp_digits.begin(), exp_digits.end(), IsDigit)) {
      int64_t exponent = 0;
      auto [end, ec] = std::from_chars(exp.data(), exp.data() + exp.size(), exponent);
      if (ec != std::errc() || end != exp.data() + exp.size()) {
        SetError(error, "exponent out of range in \"" + std::string(text) + "\"");
        return std::nullopt;
      }
      suffix = Suffix{QuantityFormat::kDecimalExponent, exponent, 0};
    }
  }
  if (!suffix) {
    if (suffix_text.find('.') != std::string_view::npos) {
      SetError(error, "malformed number in quantity \"" + std::string(text) + "\"");
    } else {
      SetError(error, "unknown suffix \"" + std::string(suffix_text) +
                          "\" (use n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or e<N>)");
    }
    return std::nullopt;
  }

  q.format_ = suffix->format;
  q.binary_exponent_ = suffix->binary_exponent;
  std::string digits = std::string(int_part) + std::string(frac_part);
  const size_t first_nonzero = digits.find_first_not_of('0');
  if (first_nonzero == std::string::npos) return q;  // zero: digits_ stays empty
  digits.erase(0, first_nonzero);
  int64_t exponent =
      std::clamp(suffix->decimal_exponent, -kExponentClamp, kExponentClamp) - static_cast<int64_t>(frac_part.size());
  while (digits.back() == '0') {
    digits.pop_back();
    ++exponent;
  }
  q.digits_ = std::move(digits);
  q.decimal_exponent_ = exponent;
  return q;
}

std::optional<int64_t> Quantity::ScaledValue(int scale) const {
  if (zero()) return 0;
  std::string digits = digits_;
  for (int i = 0; i < binary_exponent_; ++i) DoubleDigits(digits);
  const int64_t exponent = decimal_exponent_ - scale;
  constexpr size_t kMaxDigits = 19;  // INT64_MAX has 19 digits
  bool round_up = false;
  if (exponent >= 0) {
    if (static_cast<int64_t>(digits.size()) + exponent > static_cast<int64_t>(kMaxDigits)) {
      return std::nullopt;
    }
    digits.append(static_cast<size_t>(exponent), '0');
  } else if (-exponent >= static_cast<int64_t>(digits.size())) {
    // Entirely below one unit and non-zero: rounds up to one.
    return negative_ ? -1 : 1;
  } else {
    const size_t keep = digits.size() - static_cast<size_t>(-exponent);
    round_up = digits.find_first_not_of('0', keep) != std::string::npos;
    digits.resize(keep);
  }
  if (digits.size() > kMaxDigits) return std::nullopt;
  uint64_t magnitude = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), magnitude);
  if (round_up) ++magnitude;
  if (magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  const auto value = static_cast<int64_t>(magnitude);
  return negative_ ? -value : value;
}

namespace {

// `text` parsed, then scaled by `scaled` (Quantity::Value or MilliValue).
std::optional<int64_t> ParseQuantityScaled(std::string_view text, std::string* error,
                                           std::optional<int64_t> (Quantity::*scaled)() const) {
  std::optional<Quantity> q = Quantity::Parse(text, error);
  if (!q) return std::nullopt;
  std::optional<int64_t> v = ((*q).*scaled)();
  if (!v) SetError(error, "quantity \"" + std::string(text) + "\" is too large");
  return v;
}

}  // namespace

std::optional<int64_t> ParseQuantityBytes(std::string_view text, std::string* error) {
  return ParseQuantityScaled(text, error, &Quantity::Value);
}

std::optional<int64_t> ParseQuantityMillis(std::string_view text, std::string* error) {
  return ParseQuantityScaled(text, error, &Quantity::MilliValue);
}

}  // namespace headroom::spec
