// mm/status.h: errors as values at library boundaries (after leveldb's Status and Arrow's
// Result<T>).
//
// Every fallible call in reader/ and the library half of tools/ returns a Status or a
// Result<T>. Both are [[nodiscard]]. A Status is cheap to copy when OK (no allocation).
// Thread safety: a Status or Result is a value; distinct objects may be used from distinct
// threads freely, one object is not synchronised.
#pragma once

#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace mm {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,  // the caller asked for something malformed
  kNotFound = 2,         // a file, dataset or key does not exist
  kCorruption = 3,       // bytes on disk are not what the format says
  kIOError = 4,          // the OS refused (open, read, write, rename, mmap)
  kUnsupported = 5,      // well-formed but not handled (a format version, an image type)
  kAlreadyExists = 6,    // refusing to overwrite
  kInternal = 7,         // a library reported a failure that is not the input's fault
  kOutOfRange = 8,       // an index past the end
};

/// Name of a code, e.g. "Corruption".
const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return Status(StatusCode::kInvalidArgument, std::move(msg));
  }
  static Status NotFound(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
  static Status Corruption(std::string msg) {
    return Status(StatusCode::kCorruption, std::move(msg));
  }
  static Status IOError(std::string msg) { return Status(StatusCode::kIOError, std::move(msg)); }
  static Status Unsupported(std::string msg) {
    return Status(StatusCode::kUnsupported, std::move(msg));
  }
  static Status AlreadyExists(std::string msg) {
    return Status(StatusCode::kAlreadyExists, std::move(msg));
  }
  static Status Internal(std::string msg) { return Status(StatusCode::kInternal, std::move(msg)); }
  static Status OutOfRange(std::string msg) {
    return Status(StatusCode::kOutOfRange, std::move(msg));
  }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  /// The message without the code name; empty when OK.
  const std::string& message() const;
  /// "Corruption: shard-000001.h5 sample 17: ..." or "OK".
  std::string ToString() const;
  /// The same code with "context: " put before the message. OK stays OK.
  Status WithContext(const std::string& context) const;

  bool IsNotFound() const { return code() == StatusCode::kNotFound; }
  bool IsCorruption() const { return code() == StatusCode::kCorruption; }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;  // null when OK; immutable, so copies may share it
};

/// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "Result built from an OK Status has no value");
    if (status_.ok()) status_ = Status::Internal("Result built from an OK Status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T& value() & {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  /// Moves the value out; only when ok().
  T MoveValue() { return std::move(*value_); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace mm

#define MM_CONCAT_INNER_(a, b) a##b
#define MM_CONCAT_(a, b) MM_CONCAT_INNER_(a, b)

/// Returns the Status of `expr` from the enclosing function when it is not OK.
#define MM_RETURN_NOT_OK(expr)              \
  do {                                      \
    ::mm::Status _mm_st = (expr);           \
    if (!_mm_st.ok()) return _mm_st;        \
  } while (false)

#define MM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                              \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

/// `MM_ASSIGN_OR_RETURN(auto x, F());` declares x from a Result or returns its Status.
#define MM_ASSIGN_OR_RETURN(lhs, rexpr) \
  MM_ASSIGN_OR_RETURN_IMPL_(MM_CONCAT_(_mm_result_, __LINE__), lhs, rexpr)
