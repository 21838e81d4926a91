# Sediment for CMake projects: order every executable's and shared library's functions from
# its own profile at link time (docs/guide/packaging.md).
#
#   list(APPEND CMAKE_MODULE_PATH /path/to/sediment/integrations/cmake)
#   include(Sediment)        # after project()
#
# or, without touching the project: cmake -DCMAKE_PROJECT_INCLUDE=/path/to/Sediment.cmake ...
#
# Cache variables:
#   SEDIMENT_PROF_DIR    directory of <output name>.sprof profiles (default: $ENV{PROF_DIR});
#                        an absolute path. Empty: nothing changes.
#   SEDIMENT_EXECUTABLE  the sediment binary (default: found on PATH).
#
# With a profile directory it compiles with -ffunction-sections (each function in its own
# section, which the linkers need to move functions) and links with -B<build>/sediment-ld/,
# where `sediment wrappers` puts its linker shims, and -ffunction-sections again (with LTO,
# INTERPROCEDURAL_OPTIMIZATION, GCC generates the code at link time and takes the option from
# the link flags only). A link whose output has no profile runs the
# real linker unchanged. Without sediment or without a profile directory, nothing changes.

find_program(SEDIMENT_EXECUTABLE sediment)
set(SEDIMENT_PROF_DIR "$ENV{PROF_DIR}" CACHE PATH "Directory of Sediment profiles (<output>.sprof)")

if(SEDIMENT_EXECUTABLE AND SEDIMENT_PROF_DIR)
  set(_sediment_dir "${CMAKE_BINARY_DIR}/sediment-ld")
  execute_process(
    COMMAND "${SEDIMENT_EXECUTABLE}" wrappers --prof-dir "${SEDIMENT_PROF_DIR}" "${_sediment_dir}"
    RESULT_VARIABLE _sediment_rc
    OUTPUT_QUIET)
  if(_sediment_rc EQUAL 0)
    add_compile_options(-ffunction-sections)
    add_link_options(-ffunction-sections "-B${_sediment_dir}/")
    message(STATUS "Sediment: link order from ${SEDIMENT_PROF_DIR}")
  else()
    message(WARNING "Sediment: `sediment wrappers` failed (${_sediment_rc}); links unchanged")
  endif()
else()
  message(STATUS "Sediment: no sediment executable or no SEDIMENT_PROF_DIR; links unchanged")
endif()
