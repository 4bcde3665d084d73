// image_transform.h: one sample's output image as LoaderOptions ask for it: the crop window
// (crop_window.h) drawn per (seed, epoch, sample), then crop + resize + flip (crop_resize.h)
// from the stored pixels. Called by the loader's decode threads; no lock is taken (the set is
// immutable, scratch is per thread). Private to mm_reader.
#pragma once

#include <cstdint>

#include "mm/reader.h"
#include "transforms/crop_window.h"

namespace mm::reader::internal {

/// The output size `options` asks for on `set` ([height, width]); the set's image size when
/// options leave it 0.
void OutputSize(const ShardSet& set, const LoaderOptions& options, int* height, int* width);

/// The crop window of sample `sample` (stored size width x height) in `epoch`.
CropWindow SampleWindow(const LoaderOptions& options, int64_t epoch, int64_t sample, int width,
                        int height, int out_w, int out_h);

/// Whether sample `sample` is mirrored in `epoch`.
bool SampleFlip(const LoaderOptions& options, int64_t epoch, int64_t sample);

/// Writes sample `sample`'s output image for `epoch` to dst ([out_h, out_w, 3] uint8).
/// A raw set with crop kNone, no flip and an output size equal to its image size is decoded
/// straight into dst (no copy, no resize). Errors: those of ShardSet::ReadImage.
Status TransformImage(const ShardSet& set, const LoaderOptions& options, int64_t epoch,
                      int64_t sample, int out_w, int out_h, uint8_t* dst);

}  // namespace mm::reader::internal
