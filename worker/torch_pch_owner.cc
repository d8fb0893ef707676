// Owner of the shared precompiled torch header (see headroom_torch_pch in CMakeLists.txt):
// CMake compiles a target's precompiled header only for a target with a source file.
