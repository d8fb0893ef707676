// A stand-in for a library that exports its own copy of a std:: function, as a PyTorch
// wheel's LibTorch does: remove_all that deletes nothing. The configure-time probe
// (libstdcxx_first.cmake) and tests/worker/loader_binding_test.cc link it where LibTorch
// is linked and check that the calls still run libstdc++'s.
#include <filesystem>
#include <system_error>

namespace std::filesystem {

uintmax_t remove_all(const path&, error_code& ec) {
  ec.clear();
  return 0;
}

uintmax_t remove_all(const path&) { return 0; }

}  // namespace std::filesystem
