// resample.h: the Lanczos-3 resampler under mm::pack's names. It lives in the reader's
// internal primitives (mm/internal/resample.h) since the reader's load-time crops use it too.
#pragma once

#include "mm/internal/resample.h"

namespace mm::pack {

using mm::image::ResampleHasAvx2;
using mm::image::ResizeLanczos3;

}  // namespace mm::pack
