# Writes the build stamp `headroom run` checks before it starts a job (local/
# build_freshness.h): the source tree it was built from and the SHA-256 of every source
# file that goes into the runtime binaries. Run as a build step after they link:
#   cmake -DSOURCE_DIR=<repo> -DSTAMP=<build/bin/headroom.build-stamp> -P build_stamp.cmake
# Format (one fact in one place: build_freshness.cc reads exactly this):
#   headroom-build-stamp 1
#   source-dir <absolute path>
#   dirs <folder>...          (searched recursively for the patterns, to spot new files)
#   patterns <pattern>...
#   <sha256> <path relative to source-dir>      (one line per file, sorted by path)
set(_dirs core worker operator local cli cmake)
set(_patterns *.cc *.h *.cmake CMakeLists.txt)
set(_globs)
foreach(_dir ${_dirs})
  foreach(_pattern ${_patterns})
    list(APPEND _globs ${_dir}/${_pattern})
  endforeach()
endforeach()
set(_abs_globs)
foreach(_glob ${_globs})
  list(APPEND _abs_globs ${SOURCE_DIR}/${_glob})
endforeach()
file(GLOB_RECURSE _files RELATIVE ${SOURCE_DIR} LIST_DIRECTORIES false ${_abs_globs})
list(APPEND _files CMakeLists.txt)
list(SORT _files)
list(JOIN _dirs " " _dirs_line)
list(JOIN _patterns " " _patterns_line)
set(_text "headroom-build-stamp 1\nsource-dir ${SOURCE_DIR}\ndirs ${_dirs_line}\npatterns ${_patterns_line}\n")
foreach(_f ${_files})
  file(SHA256 ${SOURCE_DIR}/${_f} _hash)
  string(APPEND _text "${_hash} ${_f}\n")
endforeach()
# Written whole, then renamed: an interrupted build never leaves half a stamp.
file(WRITE ${STAMP}.tmp "${_text}")
file(RENAME ${STAMP}.tmp ${STAMP})
