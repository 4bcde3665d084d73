// vips_errors.h: libvips, started once, and the one place its process-wide error buffer is
// read (vips_error_buffer) and turned into an ImageFailure (private to image/).
#pragma once

#include <functional>
#include <string>

#include "image/image_pipeline.h"
#include "image/sniff.h"

namespace mm::pack {

/// Records `reason` and `detail` in `failure`; returns false (for `return Fail(...)`).
inline bool Fail(ImageFailure* failure, const char* reason, std::string detail) {
  failure->reason = reason;
  failure->detail = std::move(detail);
  return false;
}

/// After a libvips call failed on `bytes` (of `kind`): a failure whose reason comes from the
/// bytes (LooksTruncated: truncated_image, else corrupt_image) and whose detail is one line of
/// libvips' error text. Marks this thread's decode as failed in libvips (see
/// RunUnderVipsErrorGate). Returns false.
bool DecodeFail(ImageKind kind, const std::string& bytes, ImageFailure* failure);

/// Takes (and clears) libvips' error text and returns one line of it: the first that names
/// `kind`'s format, else the first. Only trusted under RunUnderVipsErrorGate's exclusive rerun.
std::string TakeVipsError(ImageKind kind = ImageKind::kUnknown);

/// Runs `decode` (true: success) so that a failure's detail is the file's own libvips text,
/// the same at any thread count: shared with other decodes first; if it failed inside libvips
/// (DecodeFail), once more while no other libvips call runs.
bool RunUnderVipsErrorGate(const std::function<bool()>& decode);

}  // namespace mm::pack
