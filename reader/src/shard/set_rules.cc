// set_rules.cc: the rules a shard set must satisfy (see mm/internal/set_rules.h).
#include "mm/internal/set_rules.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "mm/format.h"
#include "mm/internal/h5.h"

namespace mm::reader {
namespace {

int64_t Load64(const void* table, int64_t i) {
  int64_t v;
  std::memcpy(&v, static_cast<const uint8_t*>(table) + i * 8, 8);
  return v;
}

int32_t Load32(const void* table, int64_t i) {
  int32_t v;
  std::memcpy(&v, static_cast<const uint8_t*>(table) + i * 4, 4);
  return v;
}

// The largest i in [0, n] with table[i] <= value, for a non-decreasing int64 table [n + 1]
// whose first element is <= value.
int64_t LastAtMost(const void* table, int64_t n, int64_t value) {
  int64_t lo = 0, hi = n + 1;  // table[lo] <= value; table[hi] > value (hi past the end)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (Load64(table, mid) <= value) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

Status IdInVocabulary(const char* name, int id, int vocab_size, bool none_allowed) {
  if ((none_allowed && id == -1) || (id >= 0 && id < vocab_size)) return Status::OK();
  return Status::Corruption("index.json: tokenizer " + std::string(name) + " " +
                            std::to_string(id) + " outside [0, " + std::to_string(vocab_size) +
                            ")" + (none_allowed ? " and not -1 (none)" : ""));
}

// "shard-000003.h5 sample 17 caption 2" for caption `c` of the shard.
std::string Where(const std::string& shard, const TokenTables& t, int64_t c) {
  const int64_t s = LastAtMost(t.caption_offsets, t.samples, c);
  return shard + " sample " + std::to_string(s) + " caption " +
         std::to_string(c - Load64(t.caption_offsets, s));
}

Status CheckCaptionOffsets(const std::string& shard, const TokenTables& t) {
  int64_t prev = Load64(t.caption_offsets, 0);
  if (prev != 0) {
    return Status::Corruption(shard + ": caption_offsets[0] = " + std::to_string(prev));
  }
  for (int64_t i = 1; i <= t.samples; ++i) {
    const int64_t cur = Load64(t.caption_offsets, i);
    if (cur <= prev || cur > t.captions) {
      return Status::Corruption(shard + " sample " + std::to_string(i - 1) + ": caption_offsets " +
                                std::to_string(prev) + " -> " + std::to_string(cur) +
                                " (must increase, within " + std::to_string(t.captions) +
                                " captions)");
    }
    prev = cur;
  }
  if (prev != t.captions) {
    return Status::Corruption(shard + ": caption_offsets ends at " + std::to_string(prev) +
                              ", index.json says " + std::to_string(t.captions) + " captions");
  }
  return Status::OK();
}

// token_offsets and caption lengths; returns the longest caption. Needs valid caption_offsets.
Result<int64_t> CheckTokenOffsets(const std::string& shard, const TokenTables& t, int max_tokens) {
  int64_t prev = Load64(t.token_offsets, 0), longest = 0;
  if (prev != 0) return Status::Corruption(shard + ": token_offsets[0] = " + std::to_string(prev));
  for (int64_t c = 1; c <= t.captions; ++c) {
    const int64_t cur = Load64(t.token_offsets, c);
    if (cur < prev || cur > t.tokens) {
      return Status::Corruption(Where(shard, t, c - 1) + ": token_offsets " + std::to_string(prev) +
                                " -> " + std::to_string(cur) + " (must not decrease, within " +
                                std::to_string(t.tokens) + " tokens)");
    }
    if (cur - prev > max_tokens) {
      return Status::Corruption(Where(shard, t, c - 1) + ": " + std::to_string(cur - prev) +
                                " tokens, more than index.json's max_tokens " +
                                std::to_string(max_tokens));
    }
    longest = std::max(longest, cur - prev);
    prev = cur;
  }
  if (prev != t.tokens) {
    return Status::Corruption(shard + ": token_offsets ends at " + std::to_string(prev) +
                              ", index.json says " + std::to_string(t.tokens) + " tokens");
  }
  return longest;
}

// Every id in [0, vocab_size): blocks of ids OR-reduced (vectorised), then the first bad id of
// the first bad block named. Needs valid offsets.
Status CheckTokenIds(const std::string& shard, const TokenTables& t, int vocab_size) {
  const uint32_t vocab = static_cast<uint32_t>(vocab_size);
  constexpr int64_t kBlock = 4096;
  for (int64_t b = 0; b < t.tokens; b += kBlock) {
    const int64_t e = std::min(t.tokens, b + kBlock);
    bool bad = false;
    for (int64_t k = b; k < e; ++k) bad |= static_cast<uint32_t>(Load32(t.token_ids, k)) >= vocab;
    if (!bad) continue;
    for (int64_t k = b; k < e; ++k) {
      const int32_t id = Load32(t.token_ids, k);
      if (static_cast<uint32_t>(id) < vocab) continue;
      const int64_t c = LastAtMost(t.token_offsets, t.captions, k);
      return Status::Corruption(Where(shard, t, c) + ": token id " + std::to_string(id) +
                                " at position " + std::to_string(k - Load64(t.token_offsets, c)) +
                                " outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
  }
  return Status::OK();
}

}  // namespace

Status CheckMetadataFieldNames(const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    const bool chars_ok = std::all_of(n.begin(), n.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '.' || c == '-';
    });
    if (n.empty() || n.size() > mm::format::kMaxMetadataFieldName || !chars_ok || n == "." ||
        n == "..") {
      return Status::InvalidArgument("kept field name '" + n + "': names are 1 to " +
                                     std::to_string(mm::format::kMaxMetadataFieldName) +
                                     " characters of A-Z a-z 0-9 _ . - (not . or ..)");
    }
    if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(i), n) !=
        names.begin() + static_cast<std::ptrdiff_t>(i)) {
      return Status::InvalidArgument("kept field '" + n + "' is named twice");
    }
  }
  return Status::OK();
}

MetadataValue::Type MetadataColumnType(hid_t type) {
  if (H5Tequal(type, H5T_STD_I64LE) > 0) return MetadataValue::Type::kInt;
  if (H5Tequal(type, H5T_STD_U64LE) > 0) return MetadataValue::Type::kUint;
  if (H5Tequal(type, H5T_IEEE_F64LE) > 0) return MetadataValue::Type::kFloat;
  if (H5Tget_class(type) == H5T_STRING && H5Tis_variable_str(type) > 0 &&
      H5Tget_cset(type) == H5T_CSET_UTF8) {
    return MetadataValue::Type::kString;
  }
  h5::ClearErrors();
  return MetadataValue::Type::kMissing;
}

namespace {

// Format 2: codec, quality, resize mode and max_size agree with each other and the version.
Status CheckImageRules(const internal::IndexDocument& doc) {
  const auto bad = [](const std::string& what) {
    return Status::Corruption("index.json: " + what);
  };
  const SetInfo& info = doc.info;
  const bool jpeg = info.image_codec == mm::format::ImageCodec::kJpeg;
  if (info.format_version < mm::format::FormatVersionFor(info.image_codec)) {
    return bad("image codec \"" + std::string(mm::format::ToString(info.image_codec)) +
               "\" needs format_version 2, the set says " + std::to_string(info.format_version));
  }
  if (jpeg && (info.jpeg_quality < 1 || info.jpeg_quality > 100)) {
    return bad("JPEG quality " + std::to_string(info.jpeg_quality) + " outside [1, 100]");
  }
  if (jpeg && info.compression != mm::format::Codec::kNone) {
    return bad("a jpeg set's compression is \"" +
               std::string(mm::format::ToString(info.compression)) + "\", not \"none\"");
  }
  if (!info.resize_mode) {
    if (jpeg) return bad("resize_mode \"" + doc.other_resize_mode + "\"");
    return Status::OK();  // version 1 readers never needed it; the pixels are what they are
  }
  const std::string mode(mm::format::ToString(*info.resize_mode));
  if (mm::format::IsFixedSize(*info.resize_mode)) {
    if (info.max_size != 0) return bad("max_size in the fixed-size mode " + mode);
    return Status::OK();
  }
  if (!jpeg) return bad("resize_mode " + mode + " needs image codec \"jpeg\"");
  if (info.max_size < 1 || info.max_size > kMaxImageSide || info.image_width != info.max_size ||
      info.image_height != info.max_size) {
    return bad("resize_mode " + mode + " with max_size " + std::to_string(info.max_size) +
               " and image size " + std::to_string(info.image_width) + "x" +
               std::to_string(info.image_height) + " (both sides must equal max_size, within [1, " +
               std::to_string(kMaxImageSide) + "])");
  }
  return Status::OK();
}

}  // namespace

Status CheckImageSizes(const std::string& shard, const int32_t* sizes, int64_t n,
                       const SetInfo& info) {
  const std::optional<mm::format::ResizeMode>& mode = info.resize_mode;
  const bool fixed = !mode || mm::format::IsFixedSize(*mode);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t w = sizes[2 * i], h = sizes[2 * i + 1];
    const auto at = [&](const std::string& why) {
      return Status::Corruption(shard + " sample " + std::to_string(i) + ": image_size " +
                                std::to_string(w) + "x" + std::to_string(h) + " " + why);
    };
    if (w < 1 || h < 1 || w > kMaxImageSide || h > kMaxImageSide) {
      return at("outside [1, " + std::to_string(kMaxImageSide) + "] a side");
    }
    if (fixed && (w != info.image_width || h != info.image_height)) {
      return at("is not the set's " + std::to_string(info.image_width) + "x" +
                std::to_string(info.image_height));
    }
    if (!fixed) {
      const int32_t bounded =
          *mode == mm::format::ResizeMode::kKeepRatio ? std::min(w, h) : std::max(w, h);
      if (bounded > info.max_size) {
        return at("exceeds max_size " + std::to_string(info.max_size) + " (" +
                  std::string(mm::format::ToString(*mode)) + ")");
      }
    }
  }
  return Status::OK();
}

Status CheckSetRules(const internal::IndexDocument& doc) {
  const SetInfo& info = doc.info;
  if (Status st = CheckMetadataFieldNames(info.metadata_fields); !st.ok()) {
    return Status::Corruption("index.json: metadata.fields: " + st.message());
  }
  if (info.image_height < 1 || info.image_height > kMaxImageSide || info.image_width < 1 ||
      info.image_width > kMaxImageSide || info.channels != 3) {
    return Status::Corruption("index.json: images of " + std::to_string(info.image_width) + "x" +
                              std::to_string(info.image_height) + "x" +
                              std::to_string(info.channels) + "; sides must be within [1, " +
                              std::to_string(kMaxImageSide) + "] pixels, 3 channels");
  }
  MM_RETURN_NOT_OK(CheckImageRules(doc));
  if (!info.has_tokenizer) return Status::OK();  // text only: no ids to check
  if (info.vocab_size < 1) {
    return Status::Corruption("index.json: tokenizer vocab_size " +
                              std::to_string(info.vocab_size) + " (must be >= 1)");
  }
  MM_RETURN_NOT_OK(IdInVocabulary("pad_id", info.pad_id, info.vocab_size, false));
  MM_RETURN_NOT_OK(IdInVocabulary("unk_id", info.unk_id, info.vocab_size, false));
  MM_RETURN_NOT_OK(IdInVocabulary("bos_id", info.bos_id, info.vocab_size, true));
  MM_RETURN_NOT_OK(IdInVocabulary("eos_id", info.eos_id, info.vocab_size, true));
  if (info.max_tokens < 1) {
    return Status::Corruption("index.json: tokenizer max_tokens " +
                              std::to_string(info.max_tokens) + " (must be >= 1)");
  }
  return Status::OK();
}

Result<int64_t> CheckTokenTables(const std::string& shard, const TokenTables& t,
                                 const SetInfo& info) {
  if (t.samples < 0 || t.captions < t.samples || t.tokens < 0 || !t.caption_offsets ||
      !t.token_offsets || (t.tokens > 0 && !t.token_ids)) {
    return Status::InvalidArgument(shard + ": CheckTokenTables: malformed tables");
  }
  if (!info.has_tokenizer && t.tokens != 0) {
    return Status::Corruption(shard + ": " + std::to_string(t.tokens) +
                              " token ids in a set without a tokenizer (index.json "
                              "\"tokenizer\": null)");
  }
  MM_RETURN_NOT_OK(CheckCaptionOffsets(shard, t));
  MM_ASSIGN_OR_RETURN(int64_t longest, CheckTokenOffsets(shard, t, info.max_tokens));
  MM_RETURN_NOT_OK(CheckTokenIds(shard, t, info.vocab_size));
  return longest;
}

Status CheckTableType(hid_t type, TableType expected, const std::string& where) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  bool ok = false;
  const char* what = "";
  switch (expected) {
    case TableType::kUint8:
      ok = cls == H5T_INTEGER && size == 1 && H5Tget_sign(type) == H5T_SGN_NONE;
      what = "uint8";
      break;
    case TableType::kInt32:
    case TableType::kInt64:
      ok = cls == H5T_INTEGER && size == (expected == TableType::kInt32 ? 4u : 8u) &&
           H5Tget_order(type) == H5T_ORDER_LE && H5Tget_sign(type) == H5T_SGN_2;
      what = expected == TableType::kInt32 ? "int32 little-endian" : "int64 little-endian";
      break;
    case TableType::kFixedString:
      ok = cls == H5T_STRING && H5Tis_variable_str(type) == 0 && size >= 1 && size <= 65536;
      what = "a fixed-length string";
      break;
  }
  if (ok) return Status::OK();
  h5::ClearErrors();
  return Status::Corruption(where + " is not " + what);
}

}  // namespace mm::reader
