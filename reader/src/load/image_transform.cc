// image_transform.cc: see image_transform.h.
#include "load/image_transform.h"

#include <string>
#include <vector>

#include "order/sampler.h"
#include "set/shard_set_impl.h"
#include "transforms/crop_resize.h"

namespace mm::reader::internal {

void OutputSize(const ShardSet& set, const LoaderOptions& options, int* height, int* width) {
  *height = options.output_height > 0 ? options.output_height : set.info().image_height;
  *width = options.output_width > 0 ? options.output_width : set.info().image_width;
}

CropWindow SampleWindow(const LoaderOptions& options, int64_t epoch, int64_t sample, int width,
                        int height, int out_w, int out_h) {
  switch (options.crop) {
    case ImageCrop::kRandomResized: {
      CounterRng rng(SampleHash(options.seed, epoch, sample, kCropSalt));
      return RandomResizedCrop(width, height, RandomResizedCropParams{}, &rng);
    }
    case ImageCrop::kCenter:
      return CenterCrop(width, height, out_w, out_h, options.center_crop_ratio);
    case ImageCrop::kNone:
      break;
  }
  return CenterCrop(width, height, out_w, out_h, 1.0);
}

bool SampleFlip(const LoaderOptions& options, int64_t epoch, int64_t sample) {
  return options.horizontal_flip && (SampleHash(options.seed, epoch, sample, kFlipSalt) & 1) != 0;
}

namespace {

Status TransformStored(const ShardSet& set, const LoaderOptions& options, int64_t epoch,
                       int64_t sample, int out_w, int out_h, uint8_t* dst) {
  // The sample's shard knows its codec (a mixture may hold raw and jpeg sets).
  int64_t local = 0;
  const Shard& shard = set.impl().ShardOf(sample, &local);
  int width = 0, height = 0;
  shard.ImageSize(local, &width, &height);
  const bool flip = SampleFlip(options, epoch, sample);
  const bool whole = options.crop == ImageCrop::kNone && !flip && out_w == width && out_h == height;
  if (whole) return shard.ReadImage(local, dst);  // raw: the zero-decode path; jpeg: one decode
  const CropWindow window = SampleWindow(options, epoch, sample, width, height, out_w, out_h);
  const image::Filter filter = options.interpolation == Interpolation::kBilinear
                                   ? image::Filter::kBilinear
                                   : image::Filter::kLanczos3;
  bool compressed = false;
  const std::string_view stored = shard.StoredChunk(local, &compressed);
  const auto* bytes = reinterpret_cast<const uint8_t*>(stored.data());
  if (shard.jpeg()) {  // decode only the DCT scale and the rows and columns the window needs
    return CropResizeJpeg(bytes, stored.size(), width, height, window, out_w, out_h, flip, dst,
                          filter)
        .WithContext(set.Locate(sample));
  }
  if (!compressed) {  // raw pixels stored without zstd: cropped straight from the mapping
    CropResizePixels(bytes, width, height, window, out_w, out_h, flip, dst, filter);
    return Status::OK();
  }
  thread_local std::vector<uint8_t> pixels;  // reused: no page faults per sample
  pixels.resize(static_cast<size_t>(width) * height * 3);
  MM_RETURN_NOT_OK(shard.ReadImage(local, pixels.data()));
  CropResizePixels(pixels.data(), width, height, window, out_w, out_h, flip, dst, filter);
  return Status::OK();
}

}  // namespace

Status TransformImage(const ShardSet& set, const LoaderOptions& options, int64_t epoch,
                      int64_t sample, int out_w, int out_h, uint8_t* dst) {
  const Status st = TransformStored(set, options, epoch, sample, out_w, out_h, dst);
  if (st.ok()) return st;
  // A chunk that does not decode because its file changed under the reader: say that.
  const Status changed = set.CheckIntact(sample);
  return changed.ok() ? st : changed;
}

}  // namespace mm::reader::internal

namespace mm::reader {

Status LoadSampleImage(const ShardSet& set, const LoaderOptions& options, int64_t epoch,
                       int64_t sample, std::vector<uint8_t>* pixels, int* height, int* width) {
  if (sample < 0 || sample >= set.num_samples()) {
    return Status::OutOfRange("sample " + std::to_string(sample) + " outside [0, " +
                              std::to_string(set.num_samples()) + ")");
  }
  internal::OutputSize(set, options, height, width);
  pixels->resize(static_cast<size_t>(*height) * *width * 3);
  return internal::TransformImage(set, options, epoch, sample, *width, *height, pixels->data());
}

}  // namespace mm::reader
