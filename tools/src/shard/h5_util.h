// h5_util.h: the HDF5 helpers of mm_pack's writer and verifier (string types, scalar
// attributes, whole-dataset reads, dataset dimensions, the linked-in zstd filter), in the same
// namespace as the handle owners and the error translation of mm/internal/h5.h (mm_reader's,
// shared so that HDF5's error stack becomes a Status in exactly one place), which says what
// HDF5's thread safety is. Private to mm_pack.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mm/internal/h5.h"
#include "mm/status.h"

namespace mm::h5 {

/// Registers the zstd filter (id 32015, the code of reader/plugin/h5z_zstd.c) with this process's
/// HDF5, so that reads and writes need no HDF5_PLUGIN_PATH. Idempotent. Errors: Internal.
Status RegisterZstdFilter();

/// A variable-length UTF-8 C string type (as h5py writes `str`).
Result<Datatype> VlenUtf8Type();
/// A fixed-length NUL-padded UTF-8 string type of `bytes` bytes (>= 1).
Result<Datatype> FixedUtf8Type(size_t bytes);

/// Scalar attributes on `object`. Strings are variable-length UTF-8 (as h5py writes them).
Status WriteAttribute(hid_t object, const char* name, const std::string& value);
Status WriteAttribute(hid_t object, const char* name, int32_t value);
Status WriteAttribute(hid_t object, const char* name, int64_t value);

/// Reads a scalar string attribute (variable- or fixed-length). Errors: NotFound, Corruption.
Result<std::string> ReadStringAttribute(hid_t object, const char* name);
/// Reads a scalar integer attribute of any integer width as int64. Errors: NotFound,
/// Corruption (not an integer).
Result<int64_t> ReadIntAttribute(hid_t object, const char* name);

/// Opens dataset `name` of `file`. Errors: Corruption ("opening NAME: ...").
Result<Dataset> OpenDataset(hid_t file, const char* name);
/// Reads all of `dset` (`count` elements of `mem_type`, nothing when 0) into `buffer`.
/// Errors: Corruption ("reading NAME: ...").
Status ReadWhole(hid_t dset, hid_t mem_type, void* buffer, size_t count, const char* name);

/// The whole dataset `name` of `file` as `count` elements of `mem_type` (a numeric type of T).
/// Errors: Corruption (missing, unreadable, or of another size).
template <typename T>
Result<std::vector<T>> ReadNumeric(hid_t file, const char* name, hid_t mem_type, size_t count) {
  MM_ASSIGN_OR_RETURN(Dataset dset, OpenDataset(file, name));
  std::vector<T> values(count);
  MM_RETURN_NOT_OK(ReadWhole(dset.get(), mem_type, values.data(), count, name));
  return values;
}

/// The whole fixed-length string dataset `name` of `file` (`count` strings, NUL padding
/// dropped). Errors: Corruption.
Result<std::vector<std::string>> ReadFixedStrings(hid_t file, const char* name, size_t count);
/// The whole variable-length string dataset `name` of `file` (`count` strings).
/// Errors: Corruption.
Result<std::vector<std::string>> ReadVlenStrings(hid_t file, const char* name, size_t count);

/// Keeps libhdf5 from closing what is still open when the process exits (H5dont_atexit; call
/// first thing in main, before any HDF5 call). A shard file whose close failed on a full disk
/// stays open in HDF5 half torn down, and libhdf5's exit handler (H5_term_library) crashed
/// with SIGSEGV closing it again; everything mmpack writes is closed explicitly.
void SkipLibraryCloseAtExit();

/// Dimensions of a dataset's dataspace (empty for a scalar). Errors: Internal.
Result<std::vector<hsize_t>> DatasetDims(hid_t dataset);

}  // namespace mm::h5
