#include "worker/telemetry/blas_info.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

namespace headroom::worker {

std::string BlasLibraryPath() {
  void* sgemm = ::dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info where{};
  if (sgemm == nullptr || ::dladdr(sgemm, &where) == 0 || where.dli_fname == nullptr) return "";
  // Debian's libblas.so.3 is a symlink through /etc/alternatives: the target says which.
  char real[PATH_MAX];
  return ::realpath(where.dli_fname, real) ? std::string(real) : std::string(where.dli_fname);
}

BlasInfo DetectBlas() {
  BlasInfo info;
  const std::string path = BlasLibraryPath();
  if (path.empty()) {
    info.name = "built into LibTorch";
    return info;
  }
  // What provides sgemm_ is what runs: another BLAS may be loaded beside it (Debian's
  // OpenBLAS LAPACK loads libopenblas even when libblas.so.3 is netlib's).
  if (path.find("openblas") != std::string::npos) {
    auto config = reinterpret_cast<const char* (*)()>(::dlsym(RTLD_DEFAULT, "openblas_get_config"));
    info.name = config ? std::string(config()) : "OpenBLAS (" + path + ")";
    if (info.name.rfind("OpenBLAS", 0) != 0) info.name = "OpenBLAS " + info.name;
  } else if (path.find("blis") != std::string::npos) {
    info.name = "BLIS (" + path + ")";
  } else if (path.find("mkl") != std::string::npos) {
    info.name = "Intel MKL (" + path + ")";
  } else if (path.find("/blas/") != std::string::npos) {
    info.name = "netlib reference BLAS (" + path + ")";  // Debian's libblas3
    info.reference = true;
  } else {
    info.name = "BLAS (" + path + ")";
  }
  return info;
}

}  // namespace headroom::worker
