#include <spdlog/spdlog.h>

#include "worker/model/weights_io.h"

#include <filesystem>
#include <stdexcept>

namespace headroom::worker {

void SaveWeights(const CausalLM& model, const std::string& path) {
  torch::serialize::OutputArchive archive;
  for (const auto& [name, t] : model->OrderedParameters()) archive.write(name, t.detach().cpu());
  archive.save_to(path);
}

void LoadWeights(CausalLM model, const std::string& path_or_dir) {
  std::string path = path_or_dir;
  if (std::filesystem::is_directory(path)) path = (std::filesystem::path(path) / "model.pt").string();
  if (!std::filesystem::exists(path)) throw std::runtime_error("model.initCheckpoint: " + path + " does not exist");
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const c10::Error& e) {
    throw std::runtime_error("model.initCheckpoint: " + path + " is not a weights archive: " + e.what_without_backtrace());
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : model->OrderedParameters()) {
    torch::Tensor loaded;
    if (!archive.try_read(name, loaded)) {
      throw std::runtime_error("model.initCheckpoint: " + path + " has no tensor " + name);
    }
    if (loaded.sizes() != t.sizes()) {
      throw std::runtime_error("model.initCheckpoint: " + path + ": " + name + " has shape " +
                               c10::str(loaded.sizes()) + ", the model needs " + c10::str(t.sizes()));
    }
    t.copy_(loaded);
  }
}

}  // namespace headroom::worker
