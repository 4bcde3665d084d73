# The mmtrain benchmark: samples/s and data-wait % of the default model with the
# mmpack reader, against the same model fed its first batches again (no reading).
# Not a ctest: `ninja bench_train` or `tests/bench/train_bench.sh BUILD_DIR [STEPS]`.
if(TARGET mmtrain)
  add_custom_target(bench_train
    COMMAND ${CMAKE_COMMAND} -E env MM_SHARED_DIR=${MM_SHARED_DIR}
            sh ${CMAKE_CURRENT_LIST_DIR}/train_bench.sh ${CMAKE_BINARY_DIR}
    DEPENDS mmtrain mmpack h5z_zstd
    USES_TERMINAL)
endif()
