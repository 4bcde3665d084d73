// `mmpack show OUT N -o sample.png [--crop none|center|rrc --size S --flip --seed X --epoch E]`:
// sample N as the loader hands it out under those options (mm::reader::LoadSampleImage, the
// same pixels a training batch gets), written as PNG with libvips, with its key, captions and
// token ids printed. Captions are read through HDF5 (variable-length strings; the reader
// itself never needs their text).
#include <hdf5.h>

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "image/png.h"
#include "mm/format.h"
#include "mm/internal/set_files.h"
#include "mm/reader.h"
#include "shard/bounded_query.h"
#include "shard/h5_util.h"
#include "shard/self_contained.h"

namespace mm::pack {
namespace {

// Captions [first, first + count) of shard `path`, as UTF-8 strings, read in this process.
Result<std::vector<std::string>> ReadCaptionsHere(const std::string& path, int64_t first,
                                                  int count) {
  h5::SilenceErrors();
  MM_ASSIGN_OR_RETURN(auto file,
                      h5::Own<h5::File>(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path,
                                        StatusCode::kIOError));
  MM_ASSIGN_OR_RETURN(auto dset,
                      h5::Own<h5::Dataset>(H5Dopen2(file.get(), mm::format::kCaptions, H5P_DEFAULT),
                                           path + ": captions", StatusCode::kCorruption));
  MM_RETURN_NOT_OK(CheckDatasetSelfContained(file.get(), mm::format::kCaptions));
  MM_ASSIGN_OR_RETURN(auto space,
                      h5::Own<h5::Dataspace>(H5Dget_space(dset.get()), path + ": captions space"));
  hsize_t start[1] = {static_cast<hsize_t>(first)}, n[1] = {static_cast<hsize_t>(count)};
  MM_RETURN_NOT_OK(
      h5::Check(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, n, nullptr),
                path + ": captions selection", StatusCode::kCorruption));
  MM_ASSIGN_OR_RETURN(auto mem, h5::Own<h5::Dataspace>(H5Screate_simple(1, n, nullptr), "space"));
  MM_ASSIGN_OR_RETURN(auto type, h5::VlenUtf8Type());
  std::vector<char*> text(count, nullptr);
  MM_RETURN_NOT_OK(
      h5::Check(H5Dread(dset.get(), type.get(), mem.get(), space.get(), H5P_DEFAULT, text.data()),
                path + ": reading captions", StatusCode::kCorruption));
  std::vector<std::string> out;
  for (char* t : text) out.emplace_back(t ? t : "");
  (void)H5Dvlen_reclaim(type.get(), mem.get(), H5P_DEFAULT, text.data());
  return out;
}

// ReadCaptionsHere in a bounded child (shard/bounded_query.h): libhdf5 loops for ever on some
// damaged global heaps, where variable-length strings live (issue 9 item 1).
Result<std::vector<std::string>> ReadCaptions(const std::string& path, int64_t first, int count) {
  std::error_code ec;
  const auto bytes = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  auto query = [&]() -> Result<std::string> {
    MM_ASSIGN_OR_RETURN(auto captions, ReadCaptionsHere(path, first, count));
    std::string wire;
    for (const std::string& c : captions) PutString(c, &wire);
    return wire;
  };
  MM_ASSIGN_OR_RETURN(std::string wire, RunBounded(path, BoundsForFile(ec ? 0 : bytes), query));
  std::vector<std::string> out(static_cast<size_t>(count));
  size_t pos = 0;
  for (std::string& c : out) {
    if (!GetString(wire, &pos, &c)) return Status::Corruption(path + ": malformed captions answer");
  }
  return out;
}

}  // namespace

Status RunShow(const ShowOptions& options, std::ostream& out) {
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
  lo.crop = options.crop == "rrc"      ? mm::reader::ImageCrop::kRandomResized
            : options.crop == "center" ? mm::reader::ImageCrop::kCenter
                                       : mm::reader::ImageCrop::kNone;
  lo.output_height = lo.output_width = options.size;
  lo.horizontal_flip = options.flip;
  lo.seed = options.seed;
  std::vector<uint8_t> pixels;
  int height = 0, width = 0;
  MM_RETURN_NOT_OK(
      mm::reader::LoadSampleImage(*set, lo, options.epoch, i, &pixels, &height, &width));
  MM_RETURN_NOT_OK(WritePng(pixels.data(), width, height, options.output_png));

  // Which shard, and the sample's first caption in it.
  int64_t first = 0;
  size_t k = 0;
  while (k < info.shards.size() && i >= first + info.shards[k].samples)
    first += info.shards[k++].samples;
  int64_t caption_begin = 0;
  for (int64_t s = first; s < i; ++s) caption_begin += set->NumCaptions(s);
  const int ncap = set->NumCaptions(i);

  out << "sample " << i << " (" << set->Locate(i) << ")\n";
  out << "key: " << set->Key(i) << "\n";
  out << "image: " << info.image_width << "x" << info.image_height << " RGB, "
      << set->StoredImageBytes(i) << " stored bytes (" << info.compression << ") -> loader crop "
      << options.crop << (options.flip ? " flip" : "") << " seed " << options.seed << " epoch "
      << options.epoch << ": " << width << "x" << height << " -> " << options.output_png << "\n";
  // The shard file HDF5 reads the captions from: the set's, or its cached copy (pinned above).
  MM_ASSIGN_OR_RETURN(auto files,
                      mm::reader::internal::SetFiles::Open(options.dir, options.remote));
  MM_ASSIGN_OR_RETURN(mm::reader::internal::LocalShardFile file, files->Shard(info.shards[k]));
  auto captions = ReadCaptions(file.path, caption_begin, ncap);
  for (int c = 0; c < ncap; ++c) {
    out << "caption " << c << ": ";
    if (captions.ok()) {
      out << captions.value()[c];
    } else {
      out << "(text unreadable: " << captions.status().ToString() << ")";
    }
    auto tokens = set->Tokens(i, c);
    out << "\n  tokens (" << tokens.size() << "):";
    for (int32_t t : tokens) out << " " << t;
    out << "\n";
  }
  return Status::OK();
}

}  // namespace mm::pack
