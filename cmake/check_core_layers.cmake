# core/'s folders in layers, lowest first (folders of one layer separated by commas) (docs/design.md, "core's layers"): a file may include its own
# folder and folders of lower layers, never one of its own layer or above, so core/ has
# no include cycle and each folder builds on a known base. Neither may core/ include
# worker/, operator/, local/, cli/ (the top folders above it: check_top_layers.cmake) or
# LibTorch. Run as a test:
#   cmake -DROOT=<a tree holding core/> -P cmake/check_core_layers.cmake
# Prints each include against the order as FILE:LINE and fails when there is one.

set(HEADROOM_CORE_LAYERS
  "base"
  "files,net,metrics,memory"
  "protocol"
  "checkpoint,launch"
  "hf"
  "spec"
  "guard"
  "fuzz")

if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<tree> -P check_core_layers.cmake")
endif()

set(_rank 0)
foreach(_layer IN LISTS HEADROOM_CORE_LAYERS)
  string(REPLACE "," ";" _folders "${_layer}")
  foreach(_folder IN LISTS _folders)
    set(_layer_of_${_folder} ${_rank})
  endforeach()
  math(EXPR _rank "${_rank} + 1")
endforeach()

file(GLOB_RECURSE _files RELATIVE ${ROOT} ${ROOT}/core/*.h ${ROOT}/core/*.cc)
set(_bad "")
foreach(_file IN LISTS _files)
  string(REGEX MATCH "^core/([^/]+)/" _m "${_file}")
  set(_from "${CMAKE_MATCH_1}")
  if(_from STREQUAL "")
    continue()
  endif()
  if(NOT DEFINED _layer_of_${_from})
    string(APPEND _bad "${_file}: core/${_from}/ has no layer in cmake/check_core_layers.cmake\n")
    continue()
  endif()
  file(STRINGS ${ROOT}/${_file} _lines)
  set(_n 0)
  foreach(_line IN LISTS _lines)
    math(EXPR _n "${_n} + 1")
    if(_line MATCHES "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]+)[\">]")
      set(_inc "${CMAKE_MATCH_1}")
      if(_inc MATCHES "^(worker|operator|local|cli)/" OR _inc MATCHES "^(torch|ATen|c10)/")
        string(APPEND _bad "${_file}:${_n}: core/ includes ${_inc}\n")
      elseif(_inc MATCHES "^core/([^/]+)/")
        set(_to "${CMAKE_MATCH_1}")
        if(NOT _to STREQUAL _from)
          if(NOT DEFINED _layer_of_${_to})
            string(APPEND _bad "${_file}:${_n}: includes ${_inc}, whose folder has no layer\n")
          elseif(NOT _layer_of_${_to} LESS _layer_of_${_from})
            string(APPEND _bad "${_file}:${_n}: core/${_from}/ (layer ${_layer_of_${_from}}) includes ${_inc} "
                               "(layer ${_layer_of_${_to}}): only lower layers may be included\n")
          endif()
        endif()
      endif()
    endif()
  endforeach()
endforeach()

if(_bad)
  message(NOTICE "includes against core's layers (docs/design.md, \"core's layers\"):\n${_bad}")
  message(FATAL_ERROR "core's layers are broken")
endif()
list(LENGTH _files _count)
message(STATUS "core's layers hold: ${_count} files checked")
