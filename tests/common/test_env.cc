// Linked into every GoogleTest binary of mm_add_gtest: puts the build's locations into the
// environment before main, so that the real binaries and tools a test starts (mmpack, h5dump,
// h5py through /usr/bin/python3) find the data, the binaries and the zstd filter plugin, the
// same whether the test runs under ctest or by hand. Values already set are kept.
#include <cstdlib>

namespace {

struct TestEnvironment {
  TestEnvironment() {
    setenv("MM_SHARED_DIR", MM_SHARED_DIR, /*overwrite=*/0);
    setenv("MM_SOURCE_DIR", MM_SOURCE_DIR, 0);
    setenv("MM_BIN_DIR", MM_BIN_DIR, 0);
    setenv("HDF5_PLUGIN_PATH", MM_PLUGIN_DIR, 0);
  }
};
const TestEnvironment kTestEnvironment;

}  // namespace
