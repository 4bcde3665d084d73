// sample_text.cc: captions and sources of format-1 shards, read through HDF5 (see
// mm/sample_text.h). Independent of the mapped read path: it uses the ShardSet's public face
// (info, NumCaptions) and opens the shard files with HDF5 on its own.
#include "mm/sample_text.h"

#include <hdf5.h>

#include <algorithm>
#include <mutex>

#include "mm/format.h"
#include "mm/internal/h5.h"
#include "mm/internal/set_rules.h"
#include "set/shard_set_impl.h"

namespace mm::reader {

namespace {

// One shard opened by HDF5: the file and the three datasets text reads need.
struct OpenShard {
  ShardPin pin;  // a remote shard's cached file stays resident while open (declared first:
                 // released after the HDF5 handles below are closed)
  size_t shard = 0;
  uint64_t last_use = 0;
  h5::File file;
  h5::Dataset caption_offsets;        // int64 [N + 1]
  h5::Dataset captions;               // vlen UTF-8 string [C]
  h5::Dataset sources;                // vlen UTF-8 string [N]
  std::vector<h5::Dataset> metadata;  // metadata/<field> [N], in SetInfo::metadata_fields order
  std::vector<MetadataValue::Type> metadata_types;  // kInt, kFloat or kString, per column
};

// Opens the kept field `name` (metadata/<name>) and checks that it is [length] int64 LE,
// float64 LE or variable-length UTF-8 strings; `type` is set to the matching value type.
Result<h5::Dataset> OpenMetadata(const h5::File& file, const std::string& field, hsize_t length,
                                 MetadataValue::Type* type, const std::string& where) {
  const std::string name = std::string(mm::format::kMetadataGroup) + "/" + field;
  MM_ASSIGN_OR_RETURN(
      auto d, h5::Own<h5::Dataset>(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT),
                                   where + ": no dataset " + name, StatusCode::kCorruption));
  h5::Datatype t(H5Dget_type(d.get()));
  h5::Dataspace space(H5Dget_space(d.get()));
  hsize_t dims[1] = {0};
  bool ok = t.valid() && space.valid() && H5Sget_simple_extent_ndims(space.get()) == 1 &&
            H5Sget_simple_extent_dims(space.get(), dims, nullptr) == 1 && dims[0] == length;
  *type = ok ? MetadataColumnType(t.get()) : MetadataValue::Type::kMissing;
  if (*type == MetadataValue::Type::kMissing) {
    h5::ClearErrors();
    return Status::Corruption(where + ": dataset " + name + " is not [" + std::to_string(length) +
                              "] int64, float64 or UTF-8 strings");
  }
  return d;
}

// Opens dataset `name` of `file` and checks that it is one-dimensional with `length` elements;
// `vlen_string`: of variable-length string type, else of an integer type.
Result<h5::Dataset> OpenTable(const h5::File& file, const char* name, hsize_t length,
                              bool vlen_string, const std::string& where) {
  MM_ASSIGN_OR_RETURN(
      auto d, h5::Own<h5::Dataset>(H5Dopen2(file.get(), name, H5P_DEFAULT),
                                   where + ": no dataset " + name, StatusCode::kCorruption));
  h5::Datatype type(H5Dget_type(d.get()));
  h5::Dataspace space(H5Dget_space(d.get()));
  hsize_t dims[1] = {0};
  const bool type_ok = type.valid() && (vlen_string ? H5Tis_variable_str(type.get()) > 0
                                                    : H5Tget_class(type.get()) == H5T_INTEGER);
  if (!type_ok || !space.valid() || H5Sget_simple_extent_ndims(space.get()) != 1 ||
      H5Sget_simple_extent_dims(space.get(), dims, nullptr) != 1 || dims[0] != length) {
    h5::ClearErrors();
    return Status::Corruption(where + ": dataset " + name + " is not " +
                              (vlen_string ? "a variable-length string" : "an integer") +
                              " table of " + std::to_string(length) + " elements");
  }
  return d;
}

// A hyperslab [start, start + count) of the one-dimensional dataset `d`, and a memory space of
// `count` elements, read as `mem_type` into `out`.
Status ReadRange(const h5::Dataset& d, hid_t mem_type, hsize_t start, hsize_t count, void* out,
                 const std::string& what) {
  h5::Dataspace file_space(H5Dget_space(d.get()));
  h5::Dataspace mem_space(H5Screate_simple(1, &count, nullptr));
  if (!file_space.valid() || !mem_space.valid() ||
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr) < 0 ||
      H5Dread(d.get(), mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, out) < 0) {
    return h5::ErrorFromStack(StatusCode::kCorruption, what);
  }
  return Status::OK();
}

// Strings [start, start + count) of a variable-length string table, copied out; HDF5's
// allocations are reclaimed before returning.
Status ReadStrings(const h5::Dataset& d, hsize_t start, hsize_t count,
                   std::vector<std::string>* out, const std::string& what) {
  out->clear();
  if (count == 0) return Status::OK();
  // HDF5 converts between strings of one character set only: take the file's (UTF-8).
  h5::Datatype file_type(H5Dget_type(d.get()));
  h5::Datatype type(H5Tcopy(H5T_C_S1));
  if (!file_type.valid() || !type.valid() || H5Tset_size(type.get(), H5T_VARIABLE) < 0 ||
      H5Tset_cset(type.get(), H5Tget_cset(file_type.get())) < 0) {
    return h5::ErrorFromStack(StatusCode::kInternal, "variable-length string type");
  }
  std::vector<char*> strings(count, nullptr);
  MM_RETURN_NOT_OK(ReadRange(d, type.get(), start, count, strings.data(), what));
  for (char* s : strings) out->emplace_back(s ? s : "");
  h5::Dataspace mem_space(H5Screate_simple(1, &count, nullptr));
  (void)H5Dvlen_reclaim(type.get(), mem_space.get(), H5P_DEFAULT, strings.data());
  return Status::OK();
}

}  // namespace

struct SampleText::Impl {
  std::shared_ptr<const ShardSet> set;
  size_t max_open = 8;
  std::vector<int64_t> first_sample;  // [shards + 1] prefix sums of samples
  std::mutex mu;                      // guards open and clock
  std::vector<std::unique_ptr<OpenShard>> open;
  uint64_t clock = 0;

  // Shard k and the sample's index in it (i already range-checked).
  size_t ShardOf(int64_t i, int64_t* local) const {
    auto it = std::upper_bound(first_sample.begin(), first_sample.end(), i);
    size_t k = static_cast<size_t>(it - first_sample.begin()) - 1;
    *local = i - first_sample[k];
    return k;
  }

  // The open shard k (opened now if needed, closing the least recently used). Holds mu.
  Result<OpenShard*> Get(size_t k) {
    for (auto& s : open) {
      if (s->shard == k) {
        s->last_use = ++clock;
        return s.get();
      }
    }
    const SetInfo& info = set->info();
    const ShardEntry& e = info.shards[k];
    auto s = std::make_unique<OpenShard>();
    // A remote shard is read from its cached copy, pinned as long as it stays open here.
    MM_ASSIGN_OR_RETURN(s->pin, set->PinShard(k));
    const std::string path = set->impl().LocalPath(k);
    s->shard = k;
    s->last_use = ++clock;
    MM_ASSIGN_OR_RETURN(
        s->file, h5::Own<h5::File>(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                                   e.file + ": cannot open with HDF5", StatusCode::kIOError));
    const hsize_t n = static_cast<hsize_t>(e.samples), c = static_cast<hsize_t>(e.captions);
    MM_ASSIGN_OR_RETURN(s->caption_offsets,
                        OpenTable(s->file, mm::format::kCaptionOffsets, n + 1, false, e.file));
    MM_ASSIGN_OR_RETURN(s->captions, OpenTable(s->file, mm::format::kCaptions, c, true, e.file));
    MM_ASSIGN_OR_RETURN(s->sources, OpenTable(s->file, mm::format::kSources, n, true, e.file));
    for (const std::string& field : info.metadata_fields) {
      MetadataValue::Type type = MetadataValue::Type::kMissing;
      MM_ASSIGN_OR_RETURN(h5::Dataset d, OpenMetadata(s->file, field, n, &type, e.file));
      s->metadata.push_back(std::move(d));
      s->metadata_types.push_back(type);
    }
    if (open.size() >= max_open) {
      auto lru = std::min_element(open.begin(), open.end(), [](const auto& a, const auto& b) {
        return a->last_use < b->last_use;
      });
      open.erase(lru);
    }
    open.push_back(std::move(s));
    return open.back().get();
  }

  // The open shard of global sample i and i's index in it, after the checks every read needs.
  Result<OpenShard*> Locate(int64_t i, int64_t* local) {
    if (i < 0 || i >= set->num_samples()) {
      return Status::OutOfRange("sample " + std::to_string(i) + " outside [0, " +
                                std::to_string(set->num_samples()) + ")");
    }
    // Versions 1 and 2 store sources, captions and kept fields alike (format 2 changed only how
    // images are stored).
    const int version = set->info().format_version;
    if (version < 1 || version > 2) {
      return Status::Unsupported("SampleText reads the HDF5 strings of format versions 1 and 2, "
                                 "not " + std::to_string(version));
    }
    h5::SilenceErrors();
    return Get(ShardOf(i, local));
  }
};

// A remote set's shards are closed (their pins dropped) when each read ends: text reads never
// hold cache room that the caller's own pins may need (a cache limit of one shard still works).
// Declared after the lock, so it runs while the lock is held.
struct CloseIfRemote {
  bool remote;
  std::vector<std::unique_ptr<OpenShard>>* open;
  ~CloseIfRemote() {
    if (remote) open->clear();
  }
};

SampleText::SampleText(std::shared_ptr<const ShardSet> set, int max_open_shards)
    : impl_(std::make_unique<Impl>()) {
  impl_->set = std::move(set);
  impl_->max_open = static_cast<size_t>(std::max(1, max_open_shards));
  impl_->first_sample.push_back(0);
  for (const ShardEntry& e : impl_->set->info().shards) {
    impl_->first_sample.push_back(impl_->first_sample.back() + e.samples);
  }
}

SampleText::~SampleText() = default;

Result<std::vector<std::string>> SampleText::Captions(int64_t i) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const CloseIfRemote close{impl_->set->remote(), &impl_->open};
  int64_t local = 0;
  MM_ASSIGN_OR_RETURN(OpenShard * s, impl_->Locate(i, &local));
  const ShardEntry& e = impl_->set->info().shards[s->shard];
  const std::string where = e.file + " sample " + std::to_string(local);
  int64_t range[2] = {0, 0};
  MM_RETURN_NOT_OK(ReadRange(s->caption_offsets, H5T_NATIVE_INT64, static_cast<hsize_t>(local), 2,
                             range, where + ": reading caption_offsets"));
  // The mapped offsets were checked at Open; HDF5's answer must agree with them.
  if (range[0] < 0 || range[1] > e.captions || range[1] - range[0] != impl_->set->NumCaptions(i)) {
    return Status::Corruption(where + ": caption_offsets read through HDF5 [" +
                              std::to_string(range[0]) + ", " + std::to_string(range[1]) +
                              ") disagree with the mapped table");
  }
  std::vector<std::string> out;
  MM_RETURN_NOT_OK(ReadStrings(s->captions, static_cast<hsize_t>(range[0]),
                               static_cast<hsize_t>(range[1] - range[0]), &out,
                               where + ": reading captions"));
  return out;
}

Result<std::string> SampleText::Source(int64_t i) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const CloseIfRemote close{impl_->set->remote(), &impl_->open};
  int64_t local = 0;
  MM_ASSIGN_OR_RETURN(OpenShard * s, impl_->Locate(i, &local));
  const std::string where =
      impl_->set->info().shards[s->shard].file + " sample " + std::to_string(local);
  std::vector<std::string> out;
  MM_RETURN_NOT_OK(
      ReadStrings(s->sources, static_cast<hsize_t>(local), 1, &out, where + ": reading sources"));
  return out.at(0);
}

Result<std::vector<MetadataValue>> SampleText::Metadata(int64_t i) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const CloseIfRemote close{impl_->set->remote(), &impl_->open};
  std::vector<MetadataValue> out;
  if (impl_->set->info().metadata_fields.empty()) {
    if (i < 0 || i >= impl_->set->num_samples()) {
      return Status::OutOfRange("sample " + std::to_string(i) + " outside [0, " +
                                std::to_string(impl_->set->num_samples()) + ")");
    }
    return out;
  }
  int64_t local = 0;
  MM_ASSIGN_OR_RETURN(OpenShard * s, impl_->Locate(i, &local));
  const std::string where =
      impl_->set->info().shards[s->shard].file + " sample " + std::to_string(local);
  const auto at = static_cast<hsize_t>(local);
  for (size_t f = 0; f < s->metadata.size(); ++f) {
    MetadataValue v;
    v.type = s->metadata_types[f];
    const std::string what = where + ": reading metadata/" + impl_->set->info().metadata_fields[f];
    if (v.type == MetadataValue::Type::kInt) {
      MM_RETURN_NOT_OK(ReadRange(s->metadata[f], H5T_NATIVE_INT64, at, 1, &v.i, what));
    } else if (v.type == MetadataValue::Type::kUint) {
      MM_RETURN_NOT_OK(ReadRange(s->metadata[f], H5T_NATIVE_UINT64, at, 1, &v.u, what));
    } else if (v.type == MetadataValue::Type::kFloat) {
      MM_RETURN_NOT_OK(ReadRange(s->metadata[f], H5T_NATIVE_DOUBLE, at, 1, &v.f, what));
    } else {
      std::vector<std::string> text;
      MM_RETURN_NOT_OK(ReadStrings(s->metadata[f], at, 1, &text, what));
      v.s = std::move(text.at(0));
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace mm::reader
