// module.cc: the _mmpack extension module (pybind11). Importing it registers the zstd HDF5
// filter with the process's libhdf5 (zstd_filter.cc), then defines the errors, ShardSet and
// Loader. It links mm_reader only: never sentencepiece (Debian's libsentencepiece carries its own
// protobuf, which crashes beside `import torch`) and never LibTorch.
#include <pybind11/pybind11.h>

#include <string>

#include "bindings.h"
#include "errors.h"
#include "mm/internal/byte_size.h"

namespace py = pybind11;

PYBIND11_MODULE(_mmpack, m) {
  m.doc() = "The C++ half of the mmpack package (mm_reader through pybind11); import mmpack.";
  mm::python::RegisterErrors(m);
  mm::python::RegisterZstdFilter(m);
  mm::python::BindShardSet(m);
  mm::python::BindLoader(m);
  m.def(
      "parse_byte_size",
      [](const std::string& text) { return mm::python::ValueOrThrow(mm::ParseByteSize(text)); },
      py::arg("text"),
      "Bytes in a size such as '20GiB' or '500MB' (mm/internal/byte_size.h); ValueError when "
      "it is not one.");
}
