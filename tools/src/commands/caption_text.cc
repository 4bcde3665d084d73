// caption_text.cc: see caption_text.h.
#include "commands/caption_text.h"

#include <hdf5.h>

#include <filesystem>
#include <functional>
#include <system_error>

#include "mm/format.h"
#include "mm/internal/set_rules.h"
#include "shard/bounded_query.h"
#include "shard/h5_util.h"
#include "shard/self_contained.h"
#include "shard/shard_file.h"

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

// Row `sample` of each kept field of shard `path`, as text, read in this process.
Result<std::vector<std::string>> ReadMetadataHere(const std::string& path, int64_t sample,
                                                  const std::vector<std::string>& fields) {
  h5::SilenceErrors();
  MM_ASSIGN_OR_RETURN(auto file,
                      h5::Own<h5::File>(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), path,
                                        StatusCode::kIOError));
  std::vector<std::string> out;
  for (const std::string& field : fields) {
    const std::string name = std::string(mm::format::kMetadataGroup) + "/" + field;
    const std::string where = path + ": " + name;
    MM_ASSIGN_OR_RETURN(auto dset,
                        h5::Own<h5::Dataset>(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), where,
                                             StatusCode::kCorruption));
    MM_RETURN_NOT_OK(CheckDatasetSelfContained(file.get(), name.c_str()));
    MM_ASSIGN_OR_RETURN(auto type, h5::Own<h5::Datatype>(H5Dget_type(dset.get()), where));
    MM_ASSIGN_OR_RETURN(auto space, h5::Own<h5::Dataspace>(H5Dget_space(dset.get()), where));
    hsize_t dims[1] = {0};
    if (H5Sget_simple_extent_ndims(space.get()) != 1 ||
        H5Sget_simple_extent_dims(space.get(), dims, nullptr) != 1 ||
        static_cast<hsize_t>(sample) >= dims[0]) {
      h5::ClearErrors();
      return Status::Corruption(where + " has no row " + std::to_string(sample));
    }
    hsize_t start[1] = {static_cast<hsize_t>(sample)}, one[1] = {1};
    MM_RETURN_NOT_OK(
        h5::Check(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, one, nullptr),
                  where + ": selection", StatusCode::kCorruption));
    MM_ASSIGN_OR_RETURN(auto mem, h5::Own<h5::Dataspace>(H5Screate_simple(1, one, nullptr), "1"));
    auto read = [&](hid_t mem_type, void* value) {
      return h5::Check(H5Dread(dset.get(), mem_type, mem.get(), space.get(), H5P_DEFAULT, value),
                       where + ": reading", StatusCode::kCorruption);
    };
    const auto column = mm::reader::MetadataColumnType(type.get());
    if (column == mm::reader::MetadataValue::Type::kInt) {
      int64_t v = 0;
      MM_RETURN_NOT_OK(read(H5T_NATIVE_INT64, &v));
      out.push_back(std::to_string(v));
    } else if (column == mm::reader::MetadataValue::Type::kUint) {
      uint64_t v = 0;
      MM_RETURN_NOT_OK(read(H5T_NATIVE_UINT64, &v));
      out.push_back(std::to_string(v));
    } else if (column == mm::reader::MetadataValue::Type::kFloat) {
      double v = 0;
      MM_RETURN_NOT_OK(read(H5T_NATIVE_DOUBLE, &v));
      out.push_back(FloatText(v));
    } else if (column == mm::reader::MetadataValue::Type::kString) {
      MM_ASSIGN_OR_RETURN(auto text_type, h5::VlenUtf8Type());
      char* text = nullptr;
      MM_RETURN_NOT_OK(read(text_type.get(), &text));
      out.emplace_back(text ? text : "");
      (void)H5Dvlen_reclaim(text_type.get(), mem.get(), H5P_DEFAULT, &text);
    } else {
      return Status::Corruption(where + " is not int64, uint64, float64 or UTF-8 strings");
    }
  }
  return out;
}

// `count` strings that `read` returns, run in a bounded child (shard/bounded_query.h): libhdf5
// loops for ever on some damaged global heaps, where variable-length strings live. `what` names
// the answer in messages.
Result<std::vector<std::string>> ReadStringsBounded(
    const std::string& path, size_t count,
    const std::function<Result<std::vector<std::string>>()>& read, const char* what) {
  std::error_code ec;
  const auto bytes = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  auto query = [&]() -> Result<std::string> {
    MM_ASSIGN_OR_RETURN(auto strings, read());
    std::string wire;
    for (const std::string& s : strings) PutString(s, &wire);
    return wire;
  };
  MM_ASSIGN_OR_RETURN(std::string wire, RunBounded(path, BoundsForFile(ec ? 0 : bytes), query));
  std::vector<std::string> out(count);
  size_t pos = 0;
  for (std::string& s : out) {
    if (!GetString(wire, &pos, &s)) {
      return Status::Corruption(path + ": malformed " + what + " answer");
    }
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> ReadShardCaptions(const std::string& path, int64_t first,
                                                   int count) {
  return ReadStringsBounded(
      path, static_cast<size_t>(count), [&] { return ReadCaptionsHere(path, first, count); },
      "captions");
}

Result<ShardSampleText> ReadShardSampleText(const std::string& path, int64_t first, int count,
                                            int64_t sample,
                                            const std::vector<std::string>& fields) {
  auto read = [&]() -> Result<std::vector<std::string>> {
    MM_ASSIGN_OR_RETURN(std::vector<std::string> out, ReadCaptionsHere(path, first, count));
    if (fields.empty()) return out;
    MM_ASSIGN_OR_RETURN(std::vector<std::string> values, ReadMetadataHere(path, sample, fields));
    out.insert(out.end(), values.begin(), values.end());
    return out;
  };
  const size_t captions = static_cast<size_t>(count);
  MM_ASSIGN_OR_RETURN(std::vector<std::string> all,
                      ReadStringsBounded(path, captions + fields.size(), read, "text"));
  ShardSampleText text;
  text.metadata.assign(all.begin() + static_cast<std::ptrdiff_t>(captions), all.end());
  all.resize(captions);
  text.captions = std::move(all);
  return text;
}

Result<CaptionRange> LocateCaptions(const mm::reader::ShardSet& set, int64_t i) {
  const auto& info = set.info();
  if (i < 0 || i >= set.num_samples()) {
    return Status::OutOfRange("sample " + std::to_string(i) + " of " +
                              std::to_string(set.num_samples()));
  }
  CaptionRange range;
  int64_t first_sample = 0;
  while (range.shard < info.shards.size() && i >= first_sample + info.shards[range.shard].samples) {
    first_sample += info.shards[range.shard++].samples;
  }
  range.sample = i - first_sample;
  for (int64_t s = first_sample; s < i; ++s) range.first += set.NumCaptions(s);
  range.count = set.NumCaptions(i);
  return range;
}

Result<std::vector<std::string>> ReadSampleCaptions(const mm::reader::ShardSet& set, int64_t i) {
  const auto& info = set.info();
  MM_ASSIGN_OR_RETURN(const CaptionRange range, LocateCaptions(set, i));
  return ReadShardCaptions(info.root + "/" + info.shards[range.shard].file, range.first,
                           range.count);
}

}  // namespace mm::pack
