# The resampler benchmark: mmpack's hand-written Lanczos-3 (ResizeLanczos3) against
# libvips' vips_resize on the same decoded coco-cc photos, re-measured in the same run; prints
# the ratios. Not a timed test. Run it with either of:
#   ninja -C BUILD_DIR mm_resample_bench && BUILD_DIR/bin/mm_resample_bench [DIR] [SIZE] [REPEATS]
#   ctest --test-dir BUILD_DIR -C Bench -R resample_bench --output-on-failure
pkg_check_modules(MM_BENCH_VIPS REQUIRED IMPORTED_TARGET vips)
add_executable(mm_resample_bench ${CMAKE_CURRENT_LIST_DIR}/resample_bench.cc)
# White-box, as the tests: it names tools/src's include root (mm_pack_src) itself.
target_link_libraries(mm_resample_bench PRIVATE mm_pack mm_pack_src PkgConfig::MM_BENCH_VIPS)
target_compile_definitions(mm_resample_bench PRIVATE MM_SHARED_DIR="${MM_SHARED_DIR}")
mm_target_warnings(mm_resample_bench)
add_test(NAME resample_bench CONFIGURATIONS Bench COMMAND mm_resample_bench)
set_tests_properties(resample_bench PROPERTIES LABELS bench ENVIRONMENT "${MM_TEST_ENV}"
                     TIMEOUT 600)
