// mm/internal/unique_handle.h: a move-only owner of an integer C handle (after NVIDIA DALI's
// include/dali/core/unique_handle.h): a file descriptor (UniqueFd, mm/internal/file.h), an HDF5
// identifier (mm::h5::Handle, mm/internal/h5.h). Pointer handles have unique_ptr owners in
// mm/internal/c_handles.h.
//
// Internal (reader/internal/include). A value: distinct owners may live on distinct threads.
#pragma once

#include <utility>

namespace mm {

/// Owns one handle of type T. `Traits` gives `static constexpr T kInvalid`, `static bool
/// Valid(T)` and `static void Close(T)`; the destructor closes quietly (a close whose failure
/// matters gets its own Close() in a derived owner, as mm::h5::Handle has).
template <typename T, typename Traits>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(T handle) : handle_(handle) {}
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  UniqueHandle(UniqueHandle&& other) noexcept : handle_(other.Release()) {}
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) {
      Reset();
      handle_ = other.Release();
    }
    return *this;
  }
  ~UniqueHandle() { Reset(); }

  T get() const { return handle_; }
  bool valid() const { return Traits::Valid(handle_); }
  /// Closes now, quietly (a failure is dropped).
  void Reset() {
    if (valid()) Traits::Close(handle_);
    handle_ = Traits::kInvalid;
  }
  /// Gives the handle up without closing it.
  T Release() { return std::exchange(handle_, Traits::kInvalid); }

 private:
  T handle_ = Traits::kInvalid;
};

}  // namespace mm
