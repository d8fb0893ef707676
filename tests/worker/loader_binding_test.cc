// Which library's copy of a std:: function the worker's calls run. The dynamic loader binds a
// symbol to the first library in load order that defines it, and a PyTorch wheel's LibTorch
// defines its own std::filesystem functions (and other std:: ones): the worker must find
// libstdc++ first, whatever else is linked (worker/CMakeLists.txt, headroom_torch_deps).
//
// This binary is linked like the worker, plus libheadroom_std_clash.so, a stand-in for such a
// LibTorch: it defines std::filesystem::remove_all(path const&, error_code&) as a function that
// deletes nothing, and is linked where LibTorch is (after the objects, before the driver's
// implicit -lstdc++). If libstdc++ stops coming first, the calls below bind to the stand-in.
#include <dlfcn.h>
#include <elf.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

namespace {

namespace fs = std::filesystem;

// DT_NEEDED entries of an ELF64 file, in order (the order the loader searches them in).
std::vector<std::string> NeededLibraries(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (image.size() < sizeof(Elf64_Ehdr) || std::memcmp(image.data(), ELFMAG, SELFMAG) != 0 ||
      image[EI_CLASS] != ELFCLASS64) {
    ADD_FAILURE() << path << ": not an ELF64 file";
    return {};
  }
  const auto* ehdr = reinterpret_cast<const Elf64_Ehdr*>(image.data());
  const auto* sections = reinterpret_cast<const Elf64_Shdr*>(image.data() + ehdr->e_shoff);
  std::vector<std::string> needed;
  for (int i = 0; i < ehdr->e_shnum; ++i) {
    if (sections[i].sh_type != SHT_DYNAMIC) continue;
    const char* strings = image.data() + sections[sections[i].sh_link].sh_offset;
    const auto* dyn = reinterpret_cast<const Elf64_Dyn*>(image.data() + sections[i].sh_offset);
    for (size_t j = 0; j < sections[i].sh_size / sizeof(Elf64_Dyn) && dyn[j].d_tag != DT_NULL; ++j) {
      if (dyn[j].d_tag == DT_NEEDED) needed.emplace_back(strings + dyn[j].d_un.d_val);
    }
  }
  return needed;
}

// Libraries of the C runtime, which define no std:: symbols and may precede libstdc++.
bool IsCRuntime(const std::string& soname) {
  for (const char* prefix : {"libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so", "libgcc_s.so", "ld-linux",
                             "libasan.so", "libubsan.so", "libtsan.so"}) {
    if (soname.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// Fails naming the first library that the loader would search before libstdc++.
void ExpectLibstdcxxFirst(const std::string& binary) {
  const std::vector<std::string> needed = NeededLibraries(binary);
  ASSERT_FALSE(needed.empty()) << binary << ": no DT_NEEDED entries";
  std::string order;
  for (const std::string& lib : needed) order += " " + lib;
  for (const std::string& lib : needed) {
    if (lib.rfind("libstdc++.so", 0) == 0) return;
    if (!IsCRuntime(lib)) {
      ADD_FAILURE() << binary << ": " << lib
                    << " is searched before libstdc++, so its std:: symbols win; DT_NEEDED:" << order;
      return;
    }
  }
  ADD_FAILURE() << binary << ": libstdc++ is not in DT_NEEDED:" << order;
}

std::string LibraryDefining(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "(dladdr found nothing)";
  return info.dli_fname;
}

TEST(LoaderBinding, ThisTestSearchesLibstdcxxFirst) { ExpectLibstdcxxFirst("/proc/self/exe"); }

TEST(LoaderBinding, WorkerSearchesLibstdcxxFirst) {
  ExpectLibstdcxxFirst((fs::path(HEADROOM_BINARY_DIR) / "bin" / "headroom-worker").string());
}

TEST(LoaderBinding, StdFilesystemResolvesToLibstdcxx) {
  // Both remove_all overloads: the error_code one is what checkpoint pruning crashed in.
  using WithCode = std::uintmax_t (*)(const fs::path&, std::error_code&);
  using Throwing = std::uintmax_t (*)(const fs::path&);
  const WithCode with_code = &fs::remove_all;
  const Throwing throwing = &fs::remove_all;
  EXPECT_NE(LibraryDefining(reinterpret_cast<const void*>(with_code)).find("libstdc++.so"), std::string::npos)
      << LibraryDefining(reinterpret_cast<const void*>(with_code));
  EXPECT_NE(LibraryDefining(reinterpret_cast<const void*>(throwing)).find("libstdc++.so"), std::string::npos)
      << LibraryDefining(reinterpret_cast<const void*>(throwing));
}

TEST(LoaderBinding, RemoveAllDeletes) {
  const fs::path dir = fs::temp_directory_path() / ("headroom-loader-binding-" + std::to_string(::getpid()));
  fs::create_directories(dir / "step-000010");
  std::ofstream(dir / "step-000010" / "rank-00000.bin") << "x";
  std::error_code ec;
  const std::uintmax_t removed = fs::remove_all(dir, ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(removed, 3u) << "remove_all ran a copy that did not delete (the stand-in's?)";
  EXPECT_FALSE(fs::exists(dir));
  fs::remove_all(dir);
}

}  // namespace
