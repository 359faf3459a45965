# Which build is this?  Every binary (softverbs, softverbsd and our
# libibverbs.so.1) carries the same marker string (src/common/sv_build.c):
# "@(#)softverbs-build VERSION (git DESCRIBE)".  `softverbs --version` and
# `softverbs daemon status` read it from the files themselves, so they can
# tell which build a library or a running daemon comes from, whichever
# build the command itself is.
set(SV_GEN_DIR ${CMAKE_BINARY_DIR}/gen)
add_custom_target(sv_build_id
  COMMAND ${CMAKE_COMMAND} -DSRC=${CMAKE_SOURCE_DIR}
          -DOUT=${SV_GEN_DIR}/sv_build_id.h -DVERSION=${PROJECT_VERSION}
          -P ${CMAKE_SOURCE_DIR}/cmake/gen_build_id.cmake
  BYPRODUCTS ${SV_GEN_DIR}/sv_build_id.h
  COMMENT "" VERBATIM)
# Linked as an object into each binary: a static archive member nobody
# references would be dropped by the linker.
add_library(sv_build OBJECT ${CMAKE_SOURCE_DIR}/src/common/sv_build.c)
target_include_directories(sv_build PRIVATE ${SV_GEN_DIR}
                           ${CMAKE_SOURCE_DIR}/src/common)
set_target_properties(sv_build PROPERTIES C_VISIBILITY_PRESET hidden)
add_dependencies(sv_build sv_build_id)
# Every program and shared library built under src/ (a library added later,
# such as librdmacm, gets the marker without further ado).  Included at the
# end of the top-level CMakeLists.txt, when all of them exist.
get_property(sv_dirs DIRECTORY ${CMAKE_SOURCE_DIR} PROPERTY SUBDIRECTORIES)
foreach(d ${sv_dirs})
  if(NOT d MATCHES "^${CMAKE_SOURCE_DIR}/src/")
    continue()
  endif()
  get_property(sv_targets DIRECTORY ${d} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t ${sv_targets})
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "EXECUTABLE" OR type STREQUAL "SHARED_LIBRARY")
      target_sources(${t} PRIVATE $<TARGET_OBJECTS:sv_build>)
    endif()
  endforeach()
endforeach()
