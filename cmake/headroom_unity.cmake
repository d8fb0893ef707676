# headroom_unity(<target>): compile <target>'s .cc files in batches, one translation unit
# per batch (CMake's unity build). For a LibTorch library most of a file's compile time is
# what every file repeats (loading the precompiled header, instantiating the same
# templates): a batch pays it once, which makes the worker's build from scratch (a bare
# machine's first command, CI) about three times cheaper in CPU. A touched file rebuilds its
# batch. Files of one library share a batch, so their names at namespace scope, anonymous
# namespace included, must differ across the library. The torch-free libraries compile in
# seconds per file and are left per file.
option(HEADROOM_UNITY_BUILD "compile each library's files in batches (cmake/headroom_unity.cmake)" ON)
set(HEADROOM_UNITY_BATCH 8 CACHE STRING "files per batch with HEADROOM_UNITY_BUILD")

function(headroom_unity target)
  if(HEADROOM_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${HEADROOM_UNITY_BATCH})
  endif()
endfunction()
