// Exits 0 when this program's call to std::filesystem::remove_all runs libstdc++'s copy,
// although std_clash.cc's library (linked where LibTorch is) defines one too; prints the
// file the call binds to. See cmake/libstdcxx_first.cmake.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

int main() {
  using WithCode = std::uintmax_t (*)(const std::filesystem::path&, std::error_code&);
  const WithCode remove_all = &std::filesystem::remove_all;
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(remove_all), &info) == 0 || info.dli_fname == nullptr) {
    std::puts("(dladdr found nothing)");
    return 2;
  }
  std::puts(info.dli_fname);
  return std::strstr(info.dli_fname, "libstdc++") != nullptr ? 0 : 1;
}
