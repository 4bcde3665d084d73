// h5.cc: HDF5's error stack as a Status (see mm/internal/h5.h).
#include "mm/internal/h5.h"

#include <string>
#include <vector>

namespace mm::h5 {

void SilenceErrors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

void ClearErrors() { H5Eclear2(H5E_DEFAULT); }

namespace {

herr_t CollectError(unsigned /*n*/, const H5E_error2_t* error, void* data) {
  auto* out = static_cast<std::vector<std::string>*>(data);
  std::string entry;
  if (error->func_name) entry.append(error->func_name).append(": ");
  if (error->desc) entry.append(error->desc);
  // The sec2 driver's description of a failed write spans two lines ("time = ...\n,
  // filename = ..., errno = 28, error message = 'No space left on device', ..."): one line.
  for (char& c : entry) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  out->push_back(std::move(entry));
  return 0;
}

}  // namespace

Status ErrorFromStack(StatusCode code, const std::string& what) {
  // Upward walk: entry 0 is the innermost (the cause), the last one the API call. Keep the
  // API call and the two innermost entries so that the message stays one readable line.
  std::vector<std::string> entries;
  hid_t current = H5Eget_current_stack();
  if (current >= 0) {
    H5Ewalk2(current, H5E_WALK_UPWARD, CollectError, &entries);
    H5Eclose_stack(current);
  }
  std::string stack;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i >= 2 && i + 1 < entries.size()) continue;
    if (!stack.empty()) stack.append(i + 1 == entries.size() && i >= 2 ? " <- " : "; ");
    stack.append(entries[i]);
  }
  H5Eclear2(H5E_DEFAULT);
  if (stack.empty()) return Status(code, what);
  return Status(code, what + ": " + stack);
}

Status Check(herr_t rc, const std::string& what, StatusCode code) {
  if (rc < 0) return ErrorFromStack(code, what);
  return Status::OK();
}

}  // namespace mm::h5
