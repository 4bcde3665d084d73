// errors.h: the one place where an mm::Status becomes a Python exception.
//
//   InvalidArgument -> ValueError          NotFound      -> FileNotFoundError
//   Corruption      -> mmpack.CorruptionError   IOError  -> OSError
//   Unsupported     -> mmpack.UnsupportedError  AlreadyExists -> FileExistsError
//   OutOfRange      -> IndexError          Internal      -> RuntimeError
// The message is the Status's message ("shard-000002.h5 sample 17: zstd: ..."), without the
// code name. mmpack.CorruptionError and mmpack.UnsupportedError derive from mmpack.Error.
#pragma once

#include <pybind11/pybind11.h>

#include <utility>

#include "mm/status.h"

namespace mm::python {

/// Carries a non-OK Status out of C++ code; translated to the Python exception above by the
/// translator RegisterErrors installs. Throw it with the GIL held or not: it is translated
/// after the call returns to pybind11 (which holds the GIL).
struct StatusError {
  Status status;
};

inline void ThrowIfError(Status status) {
  if (!status.ok()) throw StatusError{std::move(status)};
}

template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result.ok()) throw StatusError{result.status()};
  return std::move(result).value();
}

}  // namespace mm::python
