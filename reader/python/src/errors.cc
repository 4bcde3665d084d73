// errors.cc: Status -> Python exception (see errors.h).
#include "errors.h"

#include <string>

#include "bindings.h"

namespace py = pybind11;

namespace mm::python {
namespace {

// Owned references to the exception classes, created once at import (never freed: module
// objects live until the interpreter ends).
PyObject* g_error = nullptr;
PyObject* g_corruption = nullptr;
PyObject* g_unsupported = nullptr;

PyObject* NewException(py::module_& m, const char* name, const char* doc, PyObject* base) {
  std::string qualified = std::string("mmpack.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base, nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(type));  // borrows; the module keeps its own reference
  return type;
}

PyObject* ExceptionFor(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
      return PyExc_ValueError;
    case StatusCode::kNotFound:
      return PyExc_FileNotFoundError;
    case StatusCode::kCorruption:
      return g_corruption;
    case StatusCode::kIOError:
      return PyExc_OSError;
    case StatusCode::kUnsupported:
      return g_unsupported;
    case StatusCode::kAlreadyExists:
      return PyExc_FileExistsError;
    case StatusCode::kOutOfRange:
      return PyExc_IndexError;
    case StatusCode::kOk:
    case StatusCode::kInternal:
      break;
  }
  return PyExc_RuntimeError;
}

}  // namespace

// Creates mmpack.Error, mmpack.CorruptionError and mmpack.UnsupportedError in `m` and installs
// the translator for StatusError.
void RegisterErrors(py::module_& m) {
  g_error =
      NewException(m, "Error", "Base class of the errors mmpack raises itself.", PyExc_Exception);
  g_corruption = NewException(
      m, "CorruptionError",
      "A shard's bytes are not what the format says (truncated file, bad zstd frame, tables that "
      "disagree with index.json). The message names the shard file and, where it applies, the "
      "sample.",
      g_error);
  g_unsupported = NewException(
      m, "UnsupportedError",
      "Well-formed input that this mmpack does not handle, such as a shard format version "
      "outside the readable range (the message names the version).",
      g_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      PyErr_SetString(ExceptionFor(e.status.code()), e.status.message().c_str());
    }
  });
}

}  // namespace mm::python
