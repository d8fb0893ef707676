#include <spdlog/spdlog.h>

#include "worker/checkpoint/checkpoint_format.h"

#include <utility>
#include <vector>

namespace headroom::worker {
namespace {

const std::vector<std::pair<c10::ScalarType, std::string>>& DtypeNames() {
  static const std::vector<std::pair<c10::ScalarType, std::string>> names = {
      {torch::kFloat32, "float32"},   {torch::kFloat64, "float64"}, {torch::kFloat16, "float16"},
      {torch::kBFloat16, "bfloat16"}, {torch::kInt64, "int64"},     {torch::kInt32, "int32"},
      {torch::kInt16, "int16"},       {torch::kInt8, "int8"},       {torch::kUInt8, "uint8"},
      {torch::kBool, "bool"}};
  return names;
}

}  // namespace

std::string DtypeName(c10::ScalarType dtype) {
  for (const auto& [type, name] : DtypeNames()) {
    if (type == dtype) return name;
  }
  throw CheckpointError("checkpoint: dtype " + std::string(c10::toString(dtype)) + " cannot be stored");
}

c10::ScalarType DtypeFromName(const std::string& name) {
  for (const auto& [type, n] : DtypeNames()) {
    if (n == name) return type;
  }
  throw CheckpointError("checkpoint: unknown dtype '" + name + "'");
}

}  // namespace headroom::worker
