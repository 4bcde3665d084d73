// h5_handle.h: a move-only owner for HDF5's integer handles, and the one place where HDF5's
// error stack becomes a Status (reader side). Private to mm_reader.
#pragma once

#include <hdf5.h>

#include <string>
#include <utility>

#include "mm/status.h"

namespace mm::reader::internal {

/// Owns one hid_t and closes it with `Close` (H5Fclose, H5Dclose, ...). Move-only. The
/// destructor ignores a failed close: the reader only reads, so nothing is lost.
template <herr_t (*Close)(hid_t)>
class H5Handle {
 public:
  H5Handle() = default;
  explicit H5Handle(hid_t id) : id_(id) {}
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle(H5Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  H5Handle& operator=(H5Handle&& other) noexcept {
    if (this != &other) {
      Reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  ~H5Handle() { Reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void Reset() {
    if (id_ >= 0) (void)Close(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

using H5File = H5Handle<H5Fclose>;
using H5Dataset = H5Handle<H5Dclose>;
using H5Space = H5Handle<H5Sclose>;
using H5Type = H5Handle<H5Tclose>;
using H5Plist = H5Handle<H5Pclose>;
using H5Attr = H5Handle<H5Aclose>;

/// Turns the current thread's HDF5 error stack into a Status of `code` whose message is
/// "`what`: <innermost HDF5 message>", and clears the stack.
Status H5Error(StatusCode code, const std::string& what);

/// Silences HDF5's automatic error printing for the calling thread (errors become Statuses).
void SilenceH5Errors();

}  // namespace mm::reader::internal
