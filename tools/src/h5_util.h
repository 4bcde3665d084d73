// h5_util.h: owners for HDF5 handles and the one place where HDF5's error stack becomes a
// Status (tools/ side; private to mm_pack).
//
// HDF5 reports failure as a negative return value plus an error stack kept per thread; by
// default it also prints that stack to stderr. SilenceErrors() turns the printing off for the
// calling thread, and ErrorFromStack() walks the stack (H5Ewalk2) into a Status message such as
// "H5Dwrite_chunk(images): H5D__chunk_direct_write: unable to write raw data chunk".
//
// Thread safety: Debian's HDF5 is built without thread safety; call HDF5 from one thread at a
// time. Handle objects are move-only values.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mm/status.h"

namespace mm::pack::h5 {

/// Turns off HDF5's automatic printing of its error stack (idempotent; call before HDF5 work).
void SilenceErrors();

/// Registers the zstd filter (id 32015, the code of tools/plugin/h5z_zstd.c) with this process's
/// HDF5, so that reads and writes need no HDF5_PLUGIN_PATH. Idempotent. Errors: Internal.
Status RegisterZstdFilter();

/// Drops whatever the HDF5 error stack holds (after a call whose failure is an answer).
void ClearErrors();

/// A Status with `code` whose message is `what` followed by the HDF5 error stack's messages
/// (innermost last). Clears the stack.
Status ErrorFromStack(StatusCode code, const std::string& what);

/// Move-only owner of an HDF5 identifier, closed with `CloseFn` (H5Fclose, H5Dclose, ...).
template <herr_t (*CloseFn)(hid_t)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      Reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  ~Handle() { Reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  /// Closes now; for handles whose close matters (H5Fclose flushes). Errors: Internal / IOError
  /// with HDF5's message.
  Status Close() {
    if (id_ < 0) return Status::OK();
    hid_t id = std::exchange(id_, H5I_INVALID_HID);
    if (CloseFn(id) < 0) return ErrorFromStack(StatusCode::kIOError, "closing HDF5 object");
    return Status::OK();
  }
  /// Closes quietly (destructor path; a failure is dropped).
  void Reset() {
    if (id_ >= 0) {
      CloseFn(id_);
      id_ = H5I_INVALID_HID;
    }
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

using File = Handle<H5Fclose>;
using Dataset = Handle<H5Dclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using PropList = Handle<H5Pclose>;
using Attribute = Handle<H5Aclose>;

/// Checks an id returned by an HDF5 create/open call: the owned handle, or Internal/NotFound
/// with `what` and the HDF5 stack.
template <typename H>
Result<H> Own(hid_t id, const std::string& what, StatusCode code = StatusCode::kInternal) {
  if (id < 0) return ErrorFromStack(code, what);
  return H(id);
}

/// Checks an herr_t: OK, or `code` with `what` and the HDF5 stack.
Status Check(herr_t rc, const std::string& what, StatusCode code = StatusCode::kInternal);

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

/// Dimensions of a dataset's dataspace (empty for a scalar). Errors: Internal.
Result<std::vector<hsize_t>> DatasetDims(hid_t dataset);

}  // namespace mm::pack::h5
