# headroom_libstdcxx_first_option(<out_var>): a link option that makes a torch binary's own
# std:: calls run libstdc++'s functions.
#
# Why: the dynamic loader binds each symbol to the first library in load order that defines
# it, and a PyTorch wheel's LibTorch exports its own copies of some std:: functions
# (std::filesystem among them); the worker's calls once bound to those and crashed. The
# linker, too, binds a reference to the first shared library on the line that defines it.
# libstdc++ has to come first, which toolchains reach differently: where `-lstdc++` finds a
# shared libstdc++, naming it first with --no-as-needed puts it first in DT_NEEDED; where it
# finds only an archive (a toolchain with a static libstdc++), `-lstdc++` before the objects
# links nothing and the calls bind to whatever shared library defines them first, so the
# shared libstdc++ the system and LibTorch load is named by its path instead.
#
# Each candidate is checked, not assumed: a probe program (cmake/libstdcxx_first/) is linked
# with it and with a stand-in library that exports its own std::filesystem::remove_all,
# linked where LibTorch is, then run; the first candidate whose call binds to libstdc++ is
# kept (cached per compiler). With none, configure warns and tests/worker/
# loader_binding_test.cc fails naming the library that wins.
function(headroom_libstdcxx_first_option out_var)
  set(_key "${CMAKE_CXX_COMPILER}|${CMAKE_CXX_COMPILER_VERSION}")
  if(DEFINED HEADROOM_LIBSTDCXX_FIRST_OPTION AND HEADROOM_LIBSTDCXX_FIRST_KEY STREQUAL _key)
    set(${out_var} "${HEADROOM_LIBSTDCXX_FIRST_OPTION}" PARENT_SCOPE)
    return()
  endif()

  set(_candidates "LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state")
  # The shared libstdc++ by path: the compiler's own, else the one the system loader finds.
  set(_paths)
  foreach(_name libstdc++.so libstdc++.so.6)
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${_name}
                    OUTPUT_VARIABLE _p OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(IS_ABSOLUTE "${_p}" AND EXISTS "${_p}")
      list(APPEND _paths "${_p}")
    endif()
  endforeach()
  find_file(_HEADROOM_SYSTEM_LIBSTDCXX libstdc++.so.6 PATHS /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu
            /lib64 /usr/lib64 NO_DEFAULT_PATH NO_CACHE)
  if(_HEADROOM_SYSTEM_LIBSTDCXX)
    list(APPEND _paths "${_HEADROOM_SYSTEM_LIBSTDCXX}")
  endif()
  list(REMOVE_DUPLICATES _paths)
  foreach(_p ${_paths})
    list(APPEND _candidates "LINKER:--push-state,--no-as-needed,${_p},--pop-state")
  endforeach()

  set(_chosen "")
  set(_tried "")
  set(_i 0)
  foreach(_option ${_candidates})
    math(EXPR _i "${_i} + 1")
    set(_dir ${CMAKE_BINARY_DIR}/CMakeFiles/libstdcxx_first/${_i})
    file(REMOVE_RECURSE ${_dir})
    try_compile(_linked ${_dir} ${PROJECT_SOURCE_DIR}/cmake/libstdcxx_first headroom_libstdcxx_first_probe
                CMAKE_FLAGS "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}" "-DHEADROOM_PROBE_LINK_OPTION=${_option}"
                OUTPUT_VARIABLE _log)
    set(_ran "not linked")
    if(_linked)
      execute_process(COMMAND ${_dir}/probe RESULT_VARIABLE _rc OUTPUT_VARIABLE _bound
                      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      set(_ran "binds to ${_bound}")
      if(_rc EQUAL 0)
        set(_chosen "${_option}")
        break()
      endif()
    endif()
    string(APPEND _tried "\n  ${_option}: ${_ran}")
  endforeach()

  if(_chosen STREQUAL "")
    message(WARNING "headroom: no link option made the probe's std:: calls bind to libstdc++ (tried:${_tried})."
                    " With a PyTorch wheel's LibTorch, the worker's std::filesystem calls may run LibTorch's copies.")
  else()
    message(STATUS "headroom: libstdc++ first with ${_chosen}")
  endif()
  set(HEADROOM_LIBSTDCXX_FIRST_OPTION "${_chosen}" CACHE INTERNAL "link option putting libstdc++ first")
  set(HEADROOM_LIBSTDCXX_FIRST_KEY "${_key}" CACHE INTERNAL "compiler the option was probed with")
  set(${out_var} "${_chosen}" PARENT_SCOPE)
endfunction()
