# headroom_component(<target> <folder> [deps...]): the library of one concept folder
# (relative to the calling CMakeLists.txt; `.` for the caller's own folder), its .cc files
# compiled into a static library (an INTERFACE library while the folder has only headers),
# with the repository root as include path and <deps> linked publicly. One library per
# folder, so a half-written file in one never breaks another part's build.
include(${CMAKE_CURRENT_LIST_DIR}/headroom_unity.cmake)

function(headroom_component name dir)
  get_filename_component(_dir ${CMAKE_CURRENT_SOURCE_DIR}/${dir} ABSOLUTE)
  file(GLOB _srcs CONFIGURE_DEPENDS ${_dir}/*.cc)
  if(_srcs)
    add_library(${name} STATIC ${_srcs})
    target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} PUBLIC ${ARGN})
    headroom_unity(${name})
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} INTERFACE ${ARGN})
  endif()
endfunction()
