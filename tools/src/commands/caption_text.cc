// caption_text.cc: see caption_text.h.
#include "commands/caption_text.h"

#include <hdf5.h>

#include "mm/format.h"
#include "shard/h5_util.h"

namespace mm::pack {
namespace {

// Captions [first, first + count) of shard `path`, as UTF-8 strings.
Result<std::vector<std::string>> ReadCaptions(const std::string& path, int64_t first, int count) {
  h5::SilenceErrors();
  MM_ASSIGN_OR_RETURN(auto file,
                      h5::Own<h5::File>(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path,
                                        StatusCode::kIOError));
  MM_ASSIGN_OR_RETURN(auto dset,
                      h5::Own<h5::Dataset>(H5Dopen2(file.get(), mm::format::kCaptions, H5P_DEFAULT),
                                           path + ": captions", StatusCode::kCorruption));
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

}  // namespace

Result<std::vector<std::string>> ReadSampleCaptions(const mm::reader::ShardSet& set, int64_t i) {
  const auto& info = set.info();
  if (i < 0 || i >= set.num_samples()) {
    return Status::OutOfRange("sample " + std::to_string(i) + " of " +
                              std::to_string(set.num_samples()));
  }
  // Which shard, and the sample's first caption in it.
  int64_t first = 0;
  size_t k = 0;
  while (k < info.shards.size() && i >= first + info.shards[k].samples) {
    first += info.shards[k++].samples;
  }
  int64_t caption_begin = 0;
  for (int64_t s = first; s < i; ++s) caption_begin += set.NumCaptions(s);
  return ReadCaptions(info.root + "/" + info.shards[k].file, caption_begin, set.NumCaptions(i));
}

}  // namespace mm::pack
