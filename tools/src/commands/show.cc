// show.cc: `mmpack show OUT N -o sample.png [--crop none|center|rrc --size S --flip --seed X --epoch E]`:
// sample N as the loader hands it out under those options (mm::reader::LoadSampleImage, the
// same pixels a training batch gets), written as PNG with libvips, with its key, captions and
// token ids printed. Captions are read through HDF5 (variable-length strings; the reader
// itself never needs their text).
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "commands/caption_text.h"
#include "commands/commands.h"
#include "set/output_dir.h"
#include "image/png.h"
#include "mm/internal/set_files.h"
#include "mm/reader.h"

namespace mm::pack {

Status RunShow(const ShowOptions& options, std::ostream& out) {
  MM_RETURN_NOT_OK(RefuseUrlOutput(options.output_png, "-o"));
  mm::reader::OpenOptions open;
  open.remote = options.remote;
  open.isolate_hdf5 = true;  // the shard's HDF5 metadata is parsed in a bounded child
  MM_ASSIGN_OR_RETURN(auto set, mm::reader::ShardSet::Open(options.dir, open));
  const int64_t i = options.index;
  if (i < 0 || i >= set->num_samples()) {
    return Status::OutOfRange("sample " + std::to_string(i) + ": the set has " +
                              std::to_string(set->num_samples()) + " samples (0.." +
                              std::to_string(set->num_samples() - 1) + ")");
  }
  // A remote set: the sample's shard is downloaded into the cache and held while we read it.
  MM_ASSIGN_OR_RETURN(mm::reader::ShardPin pin, set->PinSample(i));
  const auto& info = set->info();
  // The image as the loader hands it out under these options (its crop, size and flip).
  mm::reader::LoaderOptions lo;
  SetLoaderView(options.crop, options.size, options.interpolation, &lo);
  lo.horizontal_flip = options.flip;
  lo.seed = options.seed;
  std::vector<uint8_t> pixels;
  int height = 0, width = 0;
  MM_RETURN_NOT_OK(
      mm::reader::LoadSampleImage(*set, lo, options.epoch, i, &pixels, &height, &width));
  MM_RETURN_NOT_OK(WritePng(pixels.data(), width, height, options.output_png));

  MM_ASSIGN_OR_RETURN(const CaptionRange range, LocateCaptions(*set, i));
  const int ncap = range.count;

  out << "sample " << i << " (" << set->Locate(i) << ")\n";
  out << "key: " << set->Key(i) << "\n";
  int stored_w = 0, stored_h = 0;
  set->ImageSize(i, &stored_w, &stored_h);
  out << "image: " << stored_w << "x" << stored_h << " RGB, " << set->StoredImageBytes(i)
      << " stored bytes ("
      << (info.image_codec == format::ImageCodec::kJpeg ? format::ToString(info.image_codec)
                                                        : format::ToString(info.compression))
      << ") -> loader crop " << options.crop << (options.flip ? " flip" : "") << " seed "
      << options.seed << " epoch " << options.epoch << ": " << width << "x" << height << " -> "
      << options.output_png << "\n";
  // The shard file HDF5 reads the captions from: the set's, or its cached copy (pinned above).
  MM_ASSIGN_OR_RETURN(auto files,
                      mm::reader::internal::SetFiles::Open(options.dir, options.remote));
  MM_ASSIGN_OR_RETURN(mm::reader::internal::LocalShardFile file,
                      files->Shard(info.shards[range.shard]));
  // Captions and kept fields in one bounded child: a damaged heap costs one CPU budget.
  auto text = ReadShardSampleText(file.path, range.first, ncap, range.sample, info.metadata_fields);
  const std::string unreadable =
      text.ok() ? std::string() : "(text unreadable: " + text.status().ToString() + ")";
  for (int c = 0; c < ncap; ++c) {
    out << "caption " << c << ": "
        << (text.ok() ? text.value().captions[static_cast<size_t>(c)] : unreadable);
    auto tokens = set->Tokens(i, c);
    out << "\n  tokens (" << tokens.size() << "):";
    for (int32_t t : tokens) out << " " << t;
    out << "\n";
  }
  for (size_t f = 0; f < info.metadata_fields.size(); ++f) {  // --keep-fields
    out << "metadata " << info.metadata_fields[f] << ": "
        << (text.ok() ? text.value().metadata[f] : unreadable) << "\n";
  }
  return Status::OK();
}

void SetLoaderView(const std::string& crop, int size, const std::string& interpolation,
                   mm::reader::LoaderOptions* lo) {
  lo->crop = crop == "rrc"      ? mm::reader::ImageCrop::kRandomResized
             : crop == "center" ? mm::reader::ImageCrop::kCenter
                                : mm::reader::ImageCrop::kNone;
  lo->output_height = lo->output_width = size;
  lo->interpolation = interpolation == "bilinear" ? mm::reader::Interpolation::kBilinear
                                                  : mm::reader::Interpolation::kLanczos;
}

}  // namespace mm::pack
