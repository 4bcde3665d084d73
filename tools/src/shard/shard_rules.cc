// shard_rules.cc: see shard_rules.h.
#include "shard/shard_rules.h"

#include <vector>

#include "mm/format.h"
#include "mm/internal/set_rules.h"
#include "shard/h5_util.h"

namespace mm::pack {
namespace {

using mm::reader::TableType;

// The file datatype of dataset `table` against the reader's rule for it.
Status CheckType(hid_t file, const std::string& name, const char* table, TableType type) {
  MM_ASSIGN_OR_RETURN(h5::Dataset dset, h5::OpenDataset(file, table));
  MM_ASSIGN_OR_RETURN(h5::Datatype t, h5::Own<h5::Datatype>(H5Dget_type(dset.get()), "type"));
  return mm::reader::CheckTableType(t.get(), type, name + ": dataset '" + std::string(table) + "'");
}

}  // namespace

Status CheckShardRules(hid_t file, const std::string& name, int64_t samples, int64_t captions,
                       int64_t tokens, const mm::reader::SetInfo& info) {
  if (info.image_codec == format::ImageCodec::kJpeg) {  // format 2
    MM_RETURN_NOT_OK(CheckType(file, name, format::kImageBytes, TableType::kUint8));
    MM_RETURN_NOT_OK(CheckType(file, name, format::kImageOffsets, TableType::kInt64));
    // Their values' rules (CheckImageSizes) the verifier applies, in the same bounded child.
    MM_RETURN_NOT_OK(CheckType(file, name, format::kImageSize, TableType::kInt32));
  } else {
    MM_RETURN_NOT_OK(CheckType(file, name, format::kImages, TableType::kUint8));
  }
  MM_RETURN_NOT_OK(CheckType(file, name, format::kKeys, TableType::kFixedString));
  MM_RETURN_NOT_OK(CheckType(file, name, format::kCaptionOffsets, TableType::kInt64));
  MM_RETURN_NOT_OK(CheckType(file, name, format::kTokenOffsets, TableType::kInt64));
  MM_RETURN_NOT_OK(CheckType(file, name, format::kTokens, TableType::kInt32));
  MM_ASSIGN_OR_RETURN(auto caption_offsets,
                      h5::ReadNumeric<int64_t>(file, format::kCaptionOffsets, H5T_NATIVE_INT64,
                                               static_cast<size_t>(samples + 1)));
  MM_ASSIGN_OR_RETURN(auto token_offsets,
                      h5::ReadNumeric<int64_t>(file, format::kTokenOffsets, H5T_NATIVE_INT64,
                                               static_cast<size_t>(captions + 1)));
  MM_ASSIGN_OR_RETURN(auto token_ids,
                      h5::ReadNumeric<int32_t>(file, format::kTokens, H5T_NATIVE_INT32,
                                               static_cast<size_t>(tokens)));
  mm::reader::TokenTables t;
  t.samples = samples;
  t.captions = captions;
  t.tokens = tokens;
  t.caption_offsets = caption_offsets.data();
  t.token_offsets = token_offsets.data();
  t.token_ids = token_ids.empty() ? nullptr : token_ids.data();
  return mm::reader::CheckTokenTables(name, t, info).status();
}

}  // namespace mm::pack
