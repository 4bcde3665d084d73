// mm/span.h: a non-owning view of contiguous elements, for the reader's public API (C++17 has
// no std::span). Like std::span<T> with a dynamic extent, reduced to what the API needs.
//
// A Span does not own or keep alive what it points at: the function that returns one says how
// long its elements stay valid (e.g. ShardSet::Tokens: while the set lives). Thread safety: a
// value; reading through it is as safe as reading the elements.
#pragma once

#include <cassert>
#include <cstddef>
#include <type_traits>
#include <vector>

namespace mm {

template <typename T>
class Span {
 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  using size_type = size_t;
  using iterator = T*;

  constexpr Span() = default;
  constexpr Span(T* data, size_t size) : data_(data), size_(size) {}
  /// A read-only view of a whole vector (Span<const T> only).
  template <typename V, typename = std::enable_if_t<std::is_const_v<T> &&
                                                    std::is_same_v<std::remove_cv_t<T>, V>>>
  Span(const std::vector<V>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT: implicit

  constexpr T* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr T& operator[](size_t i) const {
    assert(i < size_);
    return data_[i];
  }
  constexpr iterator begin() const { return data_; }
  constexpr iterator end() const { return data_ + size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mm
