# The `mmpack build` benchmark (issue 2): tests/bench/build_bench.sh drives it; this adds the
# decode-floor program it compares against (libjpeg-turbo, one thread, smallest DCT scale).
# Not a ctest: run `tests/bench/build_bench.sh BUILD_DIR` by hand.
pkg_check_modules(TURBOJPEG IMPORTED_TARGET libturbojpeg)
if(TURBOJPEG_FOUND)
  add_executable(mm_decode_floor ${CMAKE_CURRENT_LIST_DIR}/build_decode_floor.cc)
  target_link_libraries(mm_decode_floor PRIVATE PkgConfig::TURBOJPEG)
else()
  message(STATUS "libturbojpeg not found (libturbojpeg0-dev): no mm_decode_floor benchmark")
endif()
