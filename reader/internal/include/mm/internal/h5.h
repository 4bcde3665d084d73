// mm/internal/h5.h: the one move-only owner of HDF5's integer handles (hid_t) and the one place
// where HDF5's error stack becomes a Status, for every mmpack library that calls HDF5 (the
// reader's chunk-table query in mm_reader, the writer and info/verify in mm_pack).
//
// Internal: not part of mm_reader's public face (reader/include/mm never includes hdf5.h).
// mm_reader compiles it (reader/src/base/h5.cc); other targets get it by linking mm_reader_internal
// PRIVATE (reader/CMakeLists.txt).
//
// HDF5 reports failure as a negative return value plus an error stack kept per thread; by
// default it also prints that stack to stderr. SilenceErrors() turns the printing off for the
// calling thread, and ErrorFromStack() walks the stack (H5Ewalk2) into a Status message such as
// "H5Dwrite_chunk(images): H5D__chunk_direct_write: unable to write raw data chunk".
//
// Thread safety: Debian 12's libhdf5 (1.10.8, serial) is built thread-safe (H5_HAVE_THREADSAFE:
// one library-wide lock, so calls from several threads are safe but run one at a time). The
// reader still queries shards one at a time under its own mutex (reader/src/shard/shard.cc), so it
// stays safe with an HDF5 built without that option. Handle objects are move-only values.
#pragma once

#include <hdf5.h>

#include <string>
#include <utility>

#include "mm/internal/unique_handle.h"
#include "mm/status.h"

namespace mm::h5 {

/// Turns off HDF5's automatic printing of its error stack for the calling thread (idempotent;
/// call before HDF5 work: errors become Statuses instead).
void SilenceErrors();

/// Drops whatever the HDF5 error stack holds (after a call whose failure is an answer).
void ClearErrors();

/// A Status with `code` whose message is `what`, then ": " and the HDF5 error stack's entries
/// ("function: description"): the two innermost (the cause) and the API call that failed, as
/// one line. Just `what` when the stack is empty. Clears the stack.
Status ErrorFromStack(StatusCode code, const std::string& what);

template <herr_t (*CloseFn)(hid_t)>
struct HidTraits {
  static constexpr hid_t kInvalid = H5I_INVALID_HID;
  static bool Valid(hid_t id) { return id >= 0; }
  static void Close(hid_t id) { (void)CloseFn(id); }
};

/// Move-only owner of an HDF5 identifier, closed with `CloseFn` (H5Fclose, H5Dclose, ...).
/// The destructor (Reset) closes quietly; where a failed close matters (H5Fclose flushes),
/// call Close().
template <herr_t (*CloseFn)(hid_t)>
class Handle : public UniqueHandle<hid_t, HidTraits<CloseFn>> {
 public:
  using UniqueHandle<hid_t, HidTraits<CloseFn>>::UniqueHandle;
  /// Closes now. Errors: IOError with HDF5's message.
  Status Close() {
    if (!this->valid()) return Status::OK();
    if (CloseFn(this->Release()) < 0) {
      return ErrorFromStack(StatusCode::kIOError, "closing HDF5 object");
    }
    return Status::OK();
  }
};

using File = Handle<H5Fclose>;
using Dataset = Handle<H5Dclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using PropList = Handle<H5Pclose>;
using Attribute = Handle<H5Aclose>;
using Group = Handle<H5Gclose>;

/// Checks an id returned by an HDF5 create/open call: the owned handle, or `code` with `what`
/// and the HDF5 stack.
template <typename H>
Result<H> Own(hid_t id, const std::string& what, StatusCode code = StatusCode::kInternal) {
  if (id < 0) return ErrorFromStack(code, what);
  return H(id);
}

/// Checks an herr_t: OK, or `code` with `what` and the HDF5 stack.
Status Check(herr_t rc, const std::string& what, StatusCode code = StatusCode::kInternal);

}  // namespace mm::h5
