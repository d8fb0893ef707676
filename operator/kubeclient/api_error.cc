#include "operator/kubeclient/api_error.h"

#include <nlohmann/json.hpp>

namespace headroom::kubeclient {

ApiError::ApiError(int code, std::string reason, std::string message, const std::string& where)
    : std::runtime_error(where + ": " + std::to_string(code) + " " + reason + ": " + message),
      code_(code),
      reason_(std::move(reason)),
      message_(std::move(message)) {}

std::string ReasonForCode(int http_code) {
  switch (http_code) {
    case 0: return "Transport";
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 409: return "Conflict";
    case 410: return "Expired";
    case 415: return "UnsupportedMediaType";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    case 504: return "Timeout";
    default: return "Unknown";
  }
}

ApiError ApiError::FromResponse(int http_code, const std::string& body, const std::string& where) {
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.value("kind", "") == "Status") {
    std::string reason = parsed.value("reason", "");
    if (reason.empty()) reason = ReasonForCode(http_code);
    return ApiError(http_code, reason, parsed.value("message", ""), where);
  }
  std::string message = body.size() > 512 ? body.substr(0, 512) + "..." : body;
  return ApiError(http_code, ReasonForCode(http_code), message, where);
}

ApiError ApiError::FromStatusJson(const std::string& status_json, const std::string& where) {
  auto parsed = nlohmann::json::parse(status_json, nullptr, false);
  int code = 500;
  if (parsed.is_object() && parsed.contains("code") && parsed["code"].is_number_integer()) {
    code = parsed["code"].get<int>();
  }
  return FromResponse(code, status_json, where);
}

}  // namespace headroom::kubeclient
