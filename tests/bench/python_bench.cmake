# The Python module's benchmark: tests/bench/python_bench.sh drives it. A ctest
# labelled "bench" that only runs in the Bench configuration:
#   ctest --test-dir BUILD -C Bench -R python_bench --output-on-failure
if(MM_WITH_PYTHON)
  add_test(NAME python_bench CONFIGURATIONS Bench
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/python_bench.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(python_bench PROPERTIES LABELS bench ENVIRONMENT "${MM_TEST_ENV}"
                       TIMEOUT 1800)
endif()

# The transform= benchmark: a colour jitter in the Loader's transform thread
# against none and against the same jitter in the loop.
#   ctest --test-dir BUILD -C Bench -R transform_bench --output-on-failure
if(MM_WITH_PYTHON)
  add_test(NAME transform_bench CONFIGURATIONS Bench
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/transform_bench.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(transform_bench PROPERTIES LABELS bench ENVIRONMENT "${MM_TEST_ENV}"
                       TIMEOUT 1800)
endif()
