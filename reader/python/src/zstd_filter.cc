// zstd_filter.cc: registers the zstd HDF5 filter (id 32015, reader/plugin/h5z_zstd.c, linked in
// as the object library mm_h5z_zstd) with the libhdf5 this module is linked against, when
// `import mmpack` loads it.
//
// Debian's h5py links the same shared libhdf5 (libhdf5_serial.so.103) as mm_reader, and a
// shared library is loaded once per process, so after `import mmpack` h5py reads zstd shards
// with no HDF5_PLUGIN_PATH, whichever of the two was imported first. An h5py that bundles its
// own libhdf5 (a PyPI wheel) has its own filter table and still needs the plugin.
#include <hdf5.h>
#include <pybind11/pybind11.h>

#include <string>

#include "bindings.h"
#include "h5z_zstd.h"  // the zstd filter of reader/plugin, linked in (mm_h5z_zstd)
#include "mm/internal/h5.h"

namespace py = pybind11;

namespace mm::python {

void RegisterZstdFilter(py::module_& m) {
  h5::SilenceErrors();
  Status status = h5::Check(H5Zregister(mm_h5z_zstd_class), "H5Zregister(zstd, 32015)");
  // The reader never needs the filter (it decompresses chunks itself); h5py does. A failure is
  // a warning, not an ImportError.
  m.attr("zstd_filter_registered") = status.ok();
  if (!status.ok()) {
    std::string message =
        "mmpack: could not register the zstd HDF5 filter; h5py will need "
        "HDF5_PLUGIN_PATH to read zstd shards: " +
        status.message();
    if (PyErr_WarnEx(PyExc_RuntimeWarning, message.c_str(), 1) < 0) throw py::error_already_set();
  }
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  m.attr("hdf5_version") =
      std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

}  // namespace mm::python
