# The reader benchmark: tests/bench/run_reader_bench.sh drives it; this adds the
# baseline program it compares against (zstd tight-loop ceiling and HDF5's H5Dread path, on the
# same shards). Also a ctest labelled "bench" that only runs in the Bench configuration:
#   ctest --test-dir BUILD -C Bench -L bench --output-on-failure
add_executable(mm_reader_ceiling ${CMAKE_CURRENT_LIST_DIR}/reader_ceiling.cc)
target_link_libraries(mm_reader_ceiling PRIVATE mm_reader ${HDF5_C_LIBRARIES} PkgConfig::ZSTD)
mm_target_warnings(mm_reader_ceiling)
target_include_directories(mm_reader_ceiling PRIVATE ${PROJECT_SOURCE_DIR}/reader/src
                           ${HDF5_C_INCLUDE_DIRS})
add_test(NAME reader_bench CONFIGURATIONS Bench
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_reader_bench.sh ${CMAKE_BINARY_DIR})
set_tests_properties(reader_bench PROPERTIES LABELS bench ENVIRONMENT "${MM_TEST_ENV}"
                     TIMEOUT 1800)

# The open-time benchmark: ShardSet::Open on one 10k/50k/100k-sample shard
# written by the real ShardWriter, against the former per-chunk HDF5 query in the same run:
#   BUILD/bin/mm_reader_open_bench WORK_DIR [N...]
add_executable(mm_reader_open_bench ${CMAKE_CURRENT_LIST_DIR}/reader_open_bench.cc)
target_link_libraries(mm_reader_open_bench PRIVATE mm_reader mm_reader_internal mm_pack mm_pack_src
                      ${HDF5_C_LIBRARIES})
target_include_directories(mm_reader_open_bench PRIVATE ${PROJECT_SOURCE_DIR}/reader/src
                           ${HDF5_C_INCLUDE_DIRS})
add_test(NAME reader_open_bench CONFIGURATIONS Bench
         COMMAND mm_reader_open_bench ${CMAKE_BINARY_DIR}/bench-open)
set_tests_properties(reader_open_bench PROPERTIES LABELS bench ENVIRONMENT "${MM_TEST_ENV}"
                     TIMEOUT 1800)

# The load-time transform benchmark: the reader's JPEG crop path on JPEG files in
# memory, for tests/bench/transforms_bench.py (FFCV 0.0.3 against mmpack in the same run):
#   tests/bench/run_transforms_bench.sh [BUILD_DIR] [WORK_DIR] [N] [SECONDS]
add_test(NAME transforms_bench CONFIGURATIONS Bench
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_transforms_bench.sh ${CMAKE_BINARY_DIR})
set_tests_properties(transforms_bench PROPERTIES LABELS bench ENVIRONMENT "${MM_TEST_ENV}"
                     TIMEOUT 1800)

# The loader's thread benchmark: images/s at prefetch 1 against 8 at 2 threads,
# and 1 against 2 threads, through `mmpack bench`:
#   tests/bench/loader_threads_bench.sh [BUILD_DIR] [WORK_DIR] [N] [SECONDS] [ROUNDS]
add_test(NAME loader_threads_bench CONFIGURATIONS Bench
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/loader_threads_bench.sh ${CMAKE_BINARY_DIR})
set_tests_properties(loader_threads_bench PROPERTIES LABELS bench ENVIRONMENT "${MM_TEST_ENV}"
                     TIMEOUT 1800)

# Raw crops that touch only what they need: a raw set's images stored as one
# zstd frame, as row-band frames (8/16/32 rows) or uncompressed, each cropped by the loader's
# own window and resize code; bytes per image and CPU per crop, interleaved, in one run:
#   BUILD/bin/mm_raw_crop_layout_bench SET_DIR [N=4000] [SIZE=224] [ROUNDS=5] [LEVEL=-1]
add_executable(mm_raw_crop_layout_bench ${CMAKE_CURRENT_LIST_DIR}/raw_crop_layout_bench.cc)
target_link_libraries(mm_raw_crop_layout_bench PRIVATE mm_reader mm_reader_internal PkgConfig::ZSTD)
target_include_directories(mm_raw_crop_layout_bench PRIVATE ${PROJECT_SOURCE_DIR}/reader/src)
mm_target_warnings(mm_raw_crop_layout_bench)
