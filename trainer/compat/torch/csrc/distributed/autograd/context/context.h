// context.h: a compatibility shim, used only when the LibTorch install lacks this header
// (Debian's libtorch-dev 1.13 ships c10d/reducer.hpp, which includes it, but not the distributed
// autograd headers). reducer.hpp needs just two names from it: the GradCallback type (checked
// by a static_assert) and ContextPtr (held as a shared_ptr, never dereferenced by mmtrain).
// The real class is in libtorch; mmtrain never touches its members, so only these names and
// a pointer-sized holder matter. Not used when the real header exists (pip torch 2.x).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace torch {
namespace distributed {
namespace autograd {

class DistAutogradContext {
 public:
  using GradCallback = std::function<bool(at::Tensor&)>;
};
using ContextPtr = std::shared_ptr<DistAutogradContext>;

}  // namespace autograd
}  // namespace distributed
}  // namespace torch
