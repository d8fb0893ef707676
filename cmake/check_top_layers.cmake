# The top folders in layers, lowest first (folders of one layer separated by commas)
# (docs/design.md, "Top folders"): a file may include its own top folder and those of
# lower layers, never one of its own layer or above. So the operator never reaches for
# the local runtime or the command line, the local runtime never for the command line,
# and the worker and the operator stay apart. tests/ and bench/ may include anything.
# Within core/, cmake/check_core_layers.cmake keeps the finer order. Run as a test:
#   cmake -DROOT=<a tree holding the top folders> -P cmake/check_top_layers.cmake
# Prints each include against the order as FILE:LINE and fails when there is one.

set(HEADROOM_TOP_LAYERS
  "core"
  "worker,operator"
  "local"
  "cli")

if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<tree> -P check_top_layers.cmake")
endif()
get_filename_component(ROOT ${ROOT} ABSOLUTE)

set(_rank 0)
set(_globs)
set(_alternatives)
foreach(_layer IN LISTS HEADROOM_TOP_LAYERS)
  string(REPLACE "," ";" _folders "${_layer}")
  foreach(_folder IN LISTS _folders)
    set(_layer_of_${_folder} ${_rank})
    list(APPEND _alternatives ${_folder})
    foreach(_ext h cc cu cuh)
      list(APPEND _globs ${ROOT}/${_folder}/*.${_ext})
    endforeach()
  endforeach()
  math(EXPR _rank "${_rank} + 1")
endforeach()
list(JOIN _alternatives "|" _alternatives)

file(GLOB_RECURSE _files RELATIVE ${ROOT} ${_globs})
set(_bad "")
foreach(_file IN LISTS _files)
  string(REGEX MATCH "^([^/]+)/" _m "${_file}")
  set(_from "${CMAKE_MATCH_1}")
  file(STRINGS ${ROOT}/${_file} _lines)
  set(_n 0)
  foreach(_line IN LISTS _lines)
    math(EXPR _n "${_n} + 1")
    if(_line MATCHES "^[ \t]*#[ \t]*include[ \t]*[\"<](${_alternatives})/")
      set(_to "${CMAKE_MATCH_1}")
      if(NOT _to STREQUAL _from AND NOT _layer_of_${_to} LESS _layer_of_${_from})
        string(REGEX MATCH "[\"<][^\">]+[\">]" _inc "${_line}")
        string(APPEND _bad "${_file}:${_n}: ${_from}/ (layer ${_layer_of_${_from}}) includes ${_inc} "
                           "(${_to}/, layer ${_layer_of_${_to}}): only lower layers may be included\n")
      endif()
    endif()
  endforeach()
endforeach()

if(_bad)
  message(NOTICE "includes against the top folders' layers (docs/design.md, \"Top folders\"):\n${_bad}")
  message(FATAL_ERROR "the top folders' layers are broken")
endif()
list(LENGTH _files _count)
message(STATUS "the top folders' layers hold: ${_count} files checked")
