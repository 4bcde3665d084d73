# The `mmpack build` benchmark: tests/bench/build_bench.sh drives it; this adds the
# decode-floor program it compares against (libjpeg-turbo, one thread, smallest DCT scale).
# Not a timed test. Run it with any of:
#   tests/bench/build_bench.sh BUILD_DIR [WORK_DIR] [N=2000] [REPEATS=3]
#   ninja -C BUILD_DIR bench_build
#   ctest --test-dir BUILD_DIR -C Bench -R build_bench --output-on-failure
pkg_check_modules(TURBOJPEG IMPORTED_TARGET libturbojpeg)
if(TURBOJPEG_FOUND)
  add_executable(mm_decode_floor ${CMAKE_CURRENT_LIST_DIR}/build_decode_floor.cc)
  target_link_libraries(mm_decode_floor PRIVATE PkgConfig::TURBOJPEG)
  mm_target_warnings(mm_decode_floor)
  add_custom_target(bench_build
    COMMAND ${CMAKE_COMMAND} -E env MM_SHARED_DIR=${MM_SHARED_DIR}
            bash ${CMAKE_CURRENT_LIST_DIR}/build_bench.sh ${CMAKE_BINARY_DIR}
    DEPENDS mmpack mm_decode_floor h5z_zstd
    USES_TERMINAL)
  add_test(NAME build_bench CONFIGURATIONS Bench
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/build_bench.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(build_bench PROPERTIES LABELS bench ENVIRONMENT "${MM_TEST_ENV}"
                       TIMEOUT 1800)
else()
  message(STATUS "libturbojpeg not found (libturbojpeg0-dev): no mm_decode_floor benchmark")
endif()
