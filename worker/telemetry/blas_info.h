// Which BLAS the CPU matmuls run on, said once at startup.
//
// Why: Debian's LibTorch calls BLAS through libblas.so.3, which is netlib's reference
// implementation unless an optimised one (OpenBLAS, BLIS, MKL) is installed. Nothing
// fails without one; every matmul is just ~28x slower (7 against 200 GFLOP/s on the
// 2-core CI machine), which looks like a slow model rather than a missing package.
#pragma once

#include <string>

namespace headroom::worker {

struct BlasInfo {
  std::string name;        // "OpenBLAS 0.3.21 ...", "netlib reference BLAS (<path>)", ...
  bool reference = false;  // netlib's unoptimised loops: worth a warning
};

// The file (symlinks resolved) that provides sgemm_ in this process; "" when none is
// exported (a LibTorch with its BLAS linked in statically).
std::string BlasLibraryPath();

// From BlasLibraryPath(): OpenBLAS (with its build configuration), BLIS, MKL, netlib's
// reference BLAS, another BLAS by path, or "built into LibTorch".
BlasInfo DetectBlas();

}  // namespace headroom::worker
