// inspect.cc: `mmpack info`, `mmpack verify` and `mmpack env` (see commands.h).
//
// verify checks a shard set against the embedded schema (schemas/shard_v1.json via
// mm::format::SchemaJson()): index.json's keys, every shard's checksum and size, root
// attributes, every dataset's dtype, rank, shape, layout, chunking and filter, the counts and
// offsets of the ragged tables, key uniqueness, and it decodes every image chunk. It stops at
// the first problem and names the shard and, where one is to blame, the sample.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <unordered_set>
#include <vector>

#include "commands/commands.h"
#include "shard/h5_util.h"
#include "commands/human_bytes.h"
#include "mm/filename.h"
#include "mm/format.h"
#include "mm/internal/checksum.h"
#include "mm/internal/file.h"
#include "mm/internal/index_json.h"
#include "mm/internal/utf8.h"
#include "mm/internal/zstd_codec.h"

namespace mm::pack {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A JSON file that is not index.json (report.json), read as the safe open reads.
// Errors: those of ReadRegularFile; Corruption (not a JSON object).
Result<json> ReadJsonFile(const fs::path& path) {
  std::string text;
  MM_RETURN_NOT_OK(ReadRegularFile(path.string(), &text));
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) {
    return Status::Corruption(path.string() + " is not a JSON object");
  }
  return value;
}

// What one shard must hold, from the index.
struct Expected {
  std::string file;
  int64_t index = 0;
  int64_t samples = 0;
  int64_t captions = 0;
  int64_t tokens = 0;
  int64_t height = 0;
  int64_t width = 0;
  format::Codec compression = format::Codec::kZstd;
  std::string tokenizer_sha256;
  int64_t vocab_size = 0;  // 0: unknown, token ids not range-checked
};

// Resolves a schema shape entry ("N", "N+1", "C", "C+1", "T", "image_height", 3) to a number.
Result<int64_t> ResolveDim(const json& dim, const Expected& e) {
  if (dim.is_number_integer()) return dim.get<int64_t>();
  std::string s = dim.is_string() ? dim.get<std::string>() : "";
  if (s == "N") return e.samples;
  if (s == "N+1") return e.samples + 1;
  if (s == "C") return e.captions;
  if (s == "C+1") return e.captions + 1;
  if (s == "T") return e.tokens;
  if (s == "image_height") return e.height;
  if (s == "image_width") return e.width;
  return Status::Internal("schema shape entry '" + dim.dump() + "' is not understood");
}

Status CheckDtype(hid_t type, const std::string& dtype, const std::string& name) {
  H5T_class_t cls = H5Tget_class(type);
  size_t size = H5Tget_size(type);
  auto bad = [&](const std::string& found) {
    return Status::Corruption("dataset '" + name + "' is " + found + ", the schema says " + dtype);
  };
  if (dtype == "uint8" || dtype == "int32" || dtype == "int64") {
    if (cls != H5T_INTEGER) return bad("not an integer");
    size_t want = dtype == "uint8" ? 1 : dtype == "int32" ? 4 : 8;
    H5T_sign_t sign = H5Tget_sign(type);
    bool want_signed = dtype != "uint8";
    if (size != want || (sign == H5T_SGN_2) != want_signed) {
      return bad("an integer of " + std::to_string(size) + " bytes" +
                 (sign == H5T_SGN_2 ? " (signed)" : " (unsigned)"));
    }
    return Status::OK();
  }
  if (dtype == "string-fixed" || dtype == "string-vlen") {
    if (cls != H5T_STRING) return bad("not a string");
    bool vlen = H5Tis_variable_str(type) > 0;
    if (vlen != (dtype == "string-vlen")) return bad(vlen ? "a vlen string" : "a fixed string");
    if (H5Tget_cset(type) != H5T_CSET_UTF8) return bad("a string not marked UTF-8");
    return Status::OK();
  }
  return Status::Internal("schema dtype '" + dtype + "' is not understood");
}

template <typename T>
Result<std::vector<T>> ReadNumeric(hid_t file, const char* name, hid_t mem_type, size_t count) {
  MM_ASSIGN_OR_RETURN(h5::Dataset dset, h5::Own<h5::Dataset>(H5Dopen2(file, name, H5P_DEFAULT),
                                                             std::string("opening ") + name,
                                                             StatusCode::kCorruption));
  std::vector<T> values(count);
  if (count > 0) {
    MM_RETURN_NOT_OK(
        h5::Check(H5Dread(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
                  std::string("reading ") + name, StatusCode::kCorruption));
  }
  return values;
}

Result<std::vector<std::string>> ReadFixedStrings(hid_t file, const char* name, size_t count) {
  MM_ASSIGN_OR_RETURN(h5::Dataset dset, h5::Own<h5::Dataset>(H5Dopen2(file, name, H5P_DEFAULT),
                                                             std::string("opening ") + name,
                                                             StatusCode::kCorruption));
  MM_ASSIGN_OR_RETURN(h5::Datatype type,
                      h5::Own<h5::Datatype>(H5Dget_type(dset.get()), "H5Dget_type"));
  size_t width = H5Tget_size(type.get());
  std::vector<char> buffer(count * width);
  if (count > 0) {
    MM_RETURN_NOT_OK(
        h5::Check(H5Dread(dset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()),
                  std::string("reading ") + name, StatusCode::kCorruption));
  }
  std::vector<std::string> out(count);
  for (size_t i = 0; i < count; ++i) {
    const char* p = buffer.data() + i * width;
    out[i].assign(p, strnlen(p, width));
  }
  return out;
}

Result<std::vector<std::string>> ReadVlenStrings(hid_t file, const char* name, size_t count) {
  MM_ASSIGN_OR_RETURN(h5::Dataset dset, h5::Own<h5::Dataset>(H5Dopen2(file, name, H5P_DEFAULT),
                                                             std::string("opening ") + name,
                                                             StatusCode::kCorruption));
  MM_ASSIGN_OR_RETURN(h5::Datatype type, h5::VlenUtf8Type());
  std::vector<char*> pointers(count, nullptr);
  if (count > 0) {
    MM_RETURN_NOT_OK(
        h5::Check(H5Dread(dset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, pointers.data()),
                  std::string("reading ") + name, StatusCode::kCorruption));
  }
  std::vector<std::string> out(count);
  for (size_t i = 0; i < count; ++i) {
    if (pointers[i] != nullptr) out[i] = pointers[i];
    H5free_memory(pointers[i]);
  }
  return out;
}

class ShardVerifier {
 public:
  ShardVerifier(const json& schema, std::unordered_set<std::string>* keys)
      : schema_(schema), keys_(keys) {}

  // Checks one shard file that passed its checksum. `sample` is set to the first bad sample
  // (or -1 when the problem is not one sample's).
  Status Verify(const fs::path& path, const Expected& e, int64_t* sample) {
    *sample = -1;
    MM_ASSIGN_OR_RETURN(h5::File file,
                        h5::Own<h5::File>(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                                          "not a readable HDF5 file", StatusCode::kCorruption));
    MM_RETURN_NOT_OK(CheckAttributes(file.get(), e));
    for (const auto& d : schema_["datasets"]) MM_RETURN_NOT_OK(CheckDataset(file.get(), d, e));
    MM_RETURN_NOT_OK(CheckTables(file.get(), e, sample));
    return CheckChunks(file.get(), e, sample);
  }

 private:
  Status CheckAttributes(hid_t file, const Expected& e) {
    for (const auto& a : schema_["root_attributes"]) {
      std::string name = a.value("name", "");
      std::string type = a.value("type", "");
      if (type == "string") {
        MM_ASSIGN_OR_RETURN(std::string value, h5::ReadStringAttribute(file, name.c_str()));
        if (a.contains("value") && value != a["value"].get<std::string>()) {
          return Status::Corruption("attribute '" + name + "' is '" + value + "', expected '" +
                                    a["value"].get<std::string>() + "'");
        }
        if (a.contains("values")) {
          const auto& allowed = a["values"];
          if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
            return Status::Corruption("attribute '" + name + "' has the unknown value '" + value +
                                      "'");
          }
        }
        if (name == format::kAttrTokenizerSha256 && value != e.tokenizer_sha256) {
          return Status::Corruption("attribute 'tokenizer_sha256' is '" + value +
                                    "', the index says '" + e.tokenizer_sha256 + "'");
        }
        if (name == format::kAttrCompression && value != ToString(e.compression)) {
          return Status::Corruption("attribute 'compression' is '" + value + "', the index says '" +
                                    std::string(ToString(e.compression)) + "'");
        }
      } else {
        MM_ASSIGN_OR_RETURN(int64_t value, h5::ReadIntAttribute(file, name.c_str()));
        if (a.contains("value") && value != a["value"].get<int64_t>()) {
          return Status::Unsupported("attribute '" + name + "' is " + std::to_string(value) +
                                     ", this build reads " + a["value"].dump());
        }
        int64_t want = -1;
        if (name == format::kAttrShardIndex) want = e.index;
        if (name == format::kAttrNumSamples) want = e.samples;
        if (name == format::kAttrNumCaptions) want = e.captions;
        if (name == format::kAttrImageHeight) want = e.height;
        if (name == format::kAttrImageWidth) want = e.width;
        if (want >= 0 && value != want) {
          return Status::Corruption("attribute '" + name + "' is " + std::to_string(value) +
                                    ", the index says " + std::to_string(want));
        }
      }
    }
    return Status::OK();
  }

  Status CheckDataset(hid_t file, const json& d, const Expected& e) {
    std::string name = d.value("name", "");
    htri_t exists = H5Lexists(file, name.c_str(), H5P_DEFAULT);
    if (exists <= 0) {
      h5::ClearErrors();
      return Status::Corruption("dataset '" + name + "' is missing");
    }
    MM_ASSIGN_OR_RETURN(
        h5::Dataset dset,
        h5::Own<h5::Dataset>(H5Dopen2(file, name.c_str(), H5P_DEFAULT),
                             "opening dataset '" + name + "'", StatusCode::kCorruption));
    MM_ASSIGN_OR_RETURN(h5::Datatype type,
                        h5::Own<h5::Datatype>(H5Dget_type(dset.get()), "H5Dget_type"));
    MM_RETURN_NOT_OK(CheckDtype(type.get(), d.value("dtype", ""), name));
    MM_ASSIGN_OR_RETURN(std::vector<hsize_t> dims, h5::DatasetDims(dset.get()));
    const auto& shape = d["shape"];
    if (dims.size() != shape.size()) {
      return Status::Corruption("dataset '" + name + "' has rank " + std::to_string(dims.size()) +
                                ", the schema says " + std::to_string(shape.size()));
    }
    for (size_t k = 0; k < dims.size(); ++k) {
      MM_ASSIGN_OR_RETURN(int64_t want, ResolveDim(shape[k], e));
      if (static_cast<int64_t>(dims[k]) != want) {
        return Status::Corruption("dataset '" + name + "' dimension " + std::to_string(k) + " is " +
                                  std::to_string(dims[k]) + ", expected " + std::to_string(want) +
                                  " (" + shape[k].dump() + ")");
      }
    }
    MM_ASSIGN_OR_RETURN(h5::PropList dcpl,
                        h5::Own<h5::PropList>(H5Dget_create_plist(dset.get()), "dcpl"));
    H5D_layout_t layout = H5Pget_layout(dcpl.get());
    std::string want_layout = d.value("layout", "any");
    if (want_layout == "contiguous" && layout != H5D_CONTIGUOUS) {
      return Status::Corruption("dataset '" + name + "' is not contiguous");
    }
    if (want_layout == "chunked") {
      if (layout != H5D_CHUNKED) return Status::Corruption("dataset '" + name + "' is not chunked");
      std::vector<hsize_t> chunk(dims.size());
      H5Pget_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
      const auto& want_chunk = d["chunk"];
      for (size_t k = 0; k < chunk.size() && k < want_chunk.size(); ++k) {
        MM_ASSIGN_OR_RETURN(int64_t want, ResolveDim(want_chunk[k], e));
        if (static_cast<int64_t>(chunk[k]) != want) {
          return Status::Corruption("dataset '" + name + "' chunk dimension " + std::to_string(k) +
                                    " is " + std::to_string(chunk[k]) + ", expected " +
                                    std::to_string(want));
        }
      }
    }
    if (d.contains("filter")) {
      bool has_zstd = H5Pget_filter_by_id2(dcpl.get(), format::kZstdFilterId, nullptr, nullptr,
                                           nullptr, 0, nullptr, nullptr) >= 0;
      h5::ClearErrors();  // a "filter not found" entry
      int nfilters = H5Pget_nfilters(dcpl.get());
      if (e.compression == format::Codec::kZstd && (!has_zstd || nfilters != 1)) {
        return Status::Corruption("dataset '" + name + "' lacks the zstd filter (32015) alone");
      }
      if (e.compression == format::Codec::kNone && nfilters != 0) {
        return Status::Corruption("dataset '" + name + "' has filters but compression is none");
      }
    }
    return Status::OK();
  }

  Status CheckTables(hid_t file, const Expected& e, int64_t* sample) {
    const size_t n = static_cast<size_t>(e.samples);
    const size_t c = static_cast<size_t>(e.captions);
    MM_ASSIGN_OR_RETURN(auto caption_offsets, ReadNumeric<int64_t>(file, format::kCaptionOffsets,
                                                                   H5T_NATIVE_INT64, n + 1));
    if (caption_offsets.front() != 0 || caption_offsets.back() != e.captions) {
      return Status::Corruption("caption_offsets must run from 0 to " + std::to_string(e.captions));
    }
    for (size_t i = 0; i < n; ++i) {
      if (caption_offsets[i + 1] <= caption_offsets[i]) {
        *sample = static_cast<int64_t>(i);
        return Status::Corruption("caption_offsets not strictly increasing (no caption)");
      }
    }
    MM_ASSIGN_OR_RETURN(auto token_offsets,
                        ReadNumeric<int64_t>(file, format::kTokenOffsets, H5T_NATIVE_INT64, c + 1));
    if (token_offsets.front() != 0 || token_offsets.back() != e.tokens) {
      return Status::Corruption("token_offsets must run from 0 to " + std::to_string(e.tokens));
    }
    for (size_t k = 0; k < c; ++k) {
      if (token_offsets[k + 1] < token_offsets[k]) {
        auto it = std::upper_bound(caption_offsets.begin(), caption_offsets.end(),
                                   static_cast<int64_t>(k));
        *sample = static_cast<int64_t>(it - caption_offsets.begin()) - 1;
        return Status::Corruption("token_offsets decrease at caption " + std::to_string(k));
      }
    }
    MM_ASSIGN_OR_RETURN(auto tokens, ReadNumeric<int32_t>(file, format::kTokens, H5T_NATIVE_INT32,
                                                          static_cast<size_t>(e.tokens)));
    for (size_t t = 0; t < tokens.size(); ++t) {
      if (tokens[t] < 0 || (e.vocab_size > 0 && tokens[t] >= e.vocab_size)) {
        auto ct =
            std::upper_bound(token_offsets.begin(), token_offsets.end(), static_cast<int64_t>(t));
        int64_t caption = static_cast<int64_t>(ct - token_offsets.begin()) - 1;
        auto st = std::upper_bound(caption_offsets.begin(), caption_offsets.end(), caption);
        *sample = static_cast<int64_t>(st - caption_offsets.begin()) - 1;
        return Status::Corruption("token id " + std::to_string(tokens[t]) +
                                  " outside the vocabulary of " + std::to_string(e.vocab_size));
      }
    }
    MM_ASSIGN_OR_RETURN(auto keys, ReadFixedStrings(file, format::kKeys, n));
    for (size_t i = 0; i < n; ++i) {
      if (keys[i].empty() || !keys_->insert(keys[i]).second) {
        *sample = static_cast<int64_t>(i);
        return Status::Corruption("key '" + keys[i] + "' is empty or not unique in the set");
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (!IsValidUtf8(keys[i])) {
        *sample = static_cast<int64_t>(i);
        return Status::Corruption("key is not valid UTF-8");
      }
    }
    keys_of_shard_ = std::move(keys);
    MM_ASSIGN_OR_RETURN(auto sources, ReadVlenStrings(file, format::kSources, n));
    for (size_t i = 0; i < n; ++i) {
      if (!IsValidUtf8(sources[i])) {
        *sample = static_cast<int64_t>(i);
        return Status::Corruption("source is not valid UTF-8");
      }
    }
    MM_ASSIGN_OR_RETURN(auto captions, ReadVlenStrings(file, format::kCaptions, c));
    for (size_t i = 0; i < n; ++i) {
      for (int64_t k = caption_offsets[i]; k < caption_offsets[i + 1]; ++k) {
        const std::string& caption = captions[static_cast<size_t>(k)];
        if (caption.empty() || !IsValidUtf8(caption)) {
          *sample = static_cast<int64_t>(i);
          return Status::Corruption("caption " + std::to_string(k) + " is empty or not UTF-8");
        }
      }
    }
    MM_ASSIGN_OR_RETURN(auto sizes,
                        ReadNumeric<int32_t>(file, format::kOriginalSize, H5T_NATIVE_INT32, n * 2));
    for (size_t i = 0; i < n; ++i) {
      if (sizes[2 * i] <= 0 || sizes[2 * i + 1] <= 0) {
        *sample = static_cast<int64_t>(i);
        return Status::Corruption("original_size is not positive");
      }
    }
    MM_ASSIGN_OR_RETURN(auto boxes,
                        ReadNumeric<int32_t>(file, format::kValidBox, H5T_NATIVE_INT32, n * 4));
    for (size_t i = 0; i < n; ++i) {
      const int32_t* b = &boxes[i * 4];
      if (b[0] < 0 || b[1] < 0 || b[2] <= 0 || b[3] <= 0 || b[0] + b[2] > e.width ||
          b[1] + b[3] > e.height) {
        *sample = static_cast<int64_t>(i);
        return Status::Corruption("valid_box outside the image");
      }
    }
    return Status::OK();
  }

  Status CheckChunks(hid_t file, const Expected& e, int64_t* sample) {
    MM_ASSIGN_OR_RETURN(h5::Dataset images,
                        h5::Own<h5::Dataset>(H5Dopen2(file, format::kImages, H5P_DEFAULT),
                                             "opening images", StatusCode::kCorruption));
    const size_t image_bytes = static_cast<size_t>(e.height * e.width * 3);
    std::vector<uint8_t> raw;
    std::vector<uint8_t> pixels(image_bytes);
    for (int64_t i = 0; i < e.samples; ++i) {
      *sample = i;
      hsize_t offset[4] = {static_cast<hsize_t>(i), 0, 0, 0};
      hsize_t stored = 0;
      if (H5Dget_chunk_storage_size(images.get(), offset, &stored) < 0 || stored == 0) {
        return h5::ErrorFromStack(StatusCode::kCorruption, "image chunk missing");
      }
      raw.resize(stored);
      uint32_t filter_mask = 0;
      MM_RETURN_NOT_OK(
          h5::Check(H5Dread_chunk(images.get(), H5P_DEFAULT, offset, &filter_mask, raw.data()),
                    "reading image chunk", StatusCode::kCorruption));
      if (e.compression == format::Codec::kNone || (filter_mask & 1u)) {
        if (raw.size() != image_bytes) {
          return Status::Corruption("raw image chunk of " + std::to_string(raw.size()) +
                                    " bytes, expected " + std::to_string(image_bytes));
        }
        continue;
      }
      if (mm::zstd::FrameContentSize(raw.data(), raw.size()) != image_bytes) {
        return Status::Corruption("image chunk is not a zstd frame of " +
                                  std::to_string(image_bytes) + " bytes");
      }
      Status decoded = mm::zstd::Decompress(raw.data(), raw.size(), pixels.data(), image_bytes);
      if (!decoded.ok()) return decoded.WithContext("image chunk does not decode");
    }
    *sample = -1;
    return Status::OK();
  }

 public:
  std::vector<std::string> keys_of_shard_;

 private:
  const json& schema_;
  std::unordered_set<std::string>* keys_;
};

// The schema's keys of index.json (schemas/shard_v1.json, "index"): every required key at the
// top and every shard key in each shard entry, beyond what the decoder needs to read the set.
Status CheckIndexKeys(const json& index, const json& schema) {
  if (!index.is_object()) return Status::OK();  // the decoder says what is wrong
  for (const auto& key : schema["index"]["required_keys"]) {
    if (!index.contains(key.get<std::string>())) {
      return Status::Corruption("index.json lacks '" + key.get<std::string>() + "'");
    }
  }
  if (!index["shards"].is_array()) return Status::Corruption("index.json 'shards' is not a list");
  for (size_t i = 0; i < index["shards"].size(); ++i) {
    const json& s = index["shards"][i];
    for (const auto& key : schema["index"]["shard_keys"]) {
      if (!s.is_object() || !s.contains(key.get<std::string>())) {
        return Status::Corruption("index.json shard " + std::to_string(i) + " lacks '" +
                                  key.get<std::string>() + "'");
      }
    }
  }
  return Status::OK();
}

// The text of `dir`/index.json for info and verify (their own message when it is missing).
Result<std::string> ReadIndex(const std::string& dir) {
  auto text = mm::reader::internal::ReadIndexText(dir);
  if (text.status().IsNotFound()) {
    return Status::NotFound((fs::path(dir) / format::kIndexFile).string() +
                            " does not exist or cannot be read");
  }
  return text;
}

// index.json of `root`, decoded by the reader's strict decoder after the schema's key check.
Result<mm::reader::internal::IndexDocument> ReadCheckedIndex(const fs::path& root,
                                                             const json& schema) {
  MM_ASSIGN_OR_RETURN(std::string text, ReadIndex(root.string()));
  json raw = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!raw.is_discarded()) MM_RETURN_NOT_OK(CheckIndexKeys(raw, schema));
  return mm::reader::internal::DecodeIndex(text, root.string());
}

Status VerifySet(const std::string& dir, std::ostream& out) {
  h5::SilenceErrors();
  MM_RETURN_NOT_OK(h5::RegisterZstdFilter());
  json schema = json::parse(format::SchemaJson(), nullptr, false);
  if (schema.is_discarded()) return Status::Internal("embedded schema is not valid JSON");
  fs::path root(dir);
  MM_ASSIGN_OR_RETURN(mm::reader::internal::IndexDocument index, ReadCheckedIndex(root, schema));
  const mm::reader::SetInfo& info = index.info;

  Expected base;
  base.height = info.image_height;
  base.width = info.image_width;
  base.compression = format::ParseCodec(info.compression).value();  // the decoder checked it
  base.vocab_size = info.vocab_size;
  base.tokenizer_sha256 = info.tokenizer_sha256;
  // The tokenizer whose ids the shards hold ships with them.
  const std::string tokenizer_file =
      index.tokenizer_file.empty() ? std::string(format::kTokenizerFile) : index.tokenizer_file;
  MM_ASSIGN_OR_RETURN(std::string tokenizer_sha, Sha256HexOfFile((root / tokenizer_file).string()));
  if (tokenizer_sha != base.tokenizer_sha256) {
    return Status::Corruption(tokenizer_file + ": sha256 is " + tokenizer_sha +
                              ", index.json says '" + base.tokenizer_sha256 + "'");
  }

  std::unordered_set<std::string> keys;
  ShardVerifier verifier(schema, &keys);
  int64_t samples = 0, captions = 0, tokens = 0, bytes = 0;
  for (size_t i = 0; i < info.shards.size(); ++i) {
    const mm::reader::ShardEntry& s = info.shards[i];
    Expected e = base;
    e.index = static_cast<int64_t>(i);
    e.file = s.file;
    e.samples = s.samples;
    e.captions = s.captions;
    e.tokens = s.tokens;
    const int64_t want_bytes = s.bytes;
    const std::string& want_hash = s.xxh3_64;
    std::string label = e.file;
    if (e.file != format::ShardFileName(e.index)) {
      return Status::Corruption("index.json shard " + std::to_string(i) + " is named '" + e.file +
                                "', expected '" + format::ShardFileName(e.index) + "'");
    }
    if (e.samples <= 0 || e.captions < e.samples || e.tokens < 0 || want_bytes <= 0) {
      return Status::Corruption(label + ": index.json counts are not valid");
    }
    fs::path path = root / e.file;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      if (fs::exists(path, ec)) {
        return Status::Corruption(label + ": shard file is not a regular file");
      }
      return Status::NotFound(label + ": shard file is missing");
    }
    int64_t size = static_cast<int64_t>(fs::file_size(path, ec));
    if (ec) return Status::IOError(label + ": " + ec.message());
    if (size != want_bytes) {
      return Status::Corruption(label + ": " + std::to_string(size) + " bytes, index.json says " +
                                std::to_string(want_bytes) +
                                (size < want_bytes ? " (truncated)" : ""));
    }
    MM_ASSIGN_OR_RETURN(std::string hash, Xxh3HexOfFile(path.string()));
    Status checksum =
        hash == want_hash
            ? Status::OK()
            : Status::Corruption(label + ": xxh3_64 is " + hash + ", index.json says " + want_hash);
    int64_t bad_sample = -1;
    Status st = verifier.Verify(path, e, &bad_sample);
    if (!st.ok()) {
      std::string where = label;
      if (bad_sample >= 0) {
        where += " sample " + std::to_string(bad_sample);
        if (static_cast<size_t>(bad_sample) < verifier.keys_of_shard_.size()) {
          where += " (key '" + verifier.keys_of_shard_[static_cast<size_t>(bad_sample)] + "')";
        }
      }
      if (!checksum.ok()) where += " (checksum mismatch too)";
      return st.WithContext(where);
    }
    MM_RETURN_NOT_OK(checksum);  // structure and chunks fine, but the bytes changed
    samples += e.samples;
    captions += e.captions;
    tokens += e.tokens;
    bytes += size;
  }
  const auto& totals = index.totals;
  if (totals.shards != static_cast<int64_t>(info.shards.size()) || totals.samples != samples ||
      totals.captions != captions || totals.tokens != tokens || totals.bytes != bytes) {
    return Status::Corruption(
        "index.json totals do not match its shards (" + std::to_string(info.shards.size()) +
        " shards, " + std::to_string(samples) + " samples, " + std::to_string(captions) +
        " captions, " + std::to_string(tokens) + " tokens, " + std::to_string(bytes) + " bytes)");
  }
  // A shard file beyond the index is a leftover of another build.
  fs::path extra = root / format::ShardFileName(static_cast<int64_t>(info.shards.size()));
  std::error_code ec;
  if (fs::exists(extra, ec)) {
    return Status::Corruption(extra.filename().string() +
                              " exists but index.json does not list it");
  }
  out << "verify: OK: " << info.shards.size() << " shards, " << samples << " samples, " << captions
      << " captions, " << tokens << " tokens, " << HumanBytes(static_cast<double>(bytes))
      << "; checksums, schema, offsets, keys and every image chunk checked\n";
  return Status::OK();
}

}  // namespace

Status RunVerify(const std::string& dir, std::ostream& out) {
  try {
    return VerifySet(dir, out);
  } catch (const json::exception& e) {
    // index.json with a value of the wrong JSON type.
    return Status::Corruption(std::string("index.json: ") + e.what());
  }
}

Status RunInfo(const std::string& dir, std::ostream& out) {
  fs::path root(dir);
  MM_ASSIGN_OR_RETURN(std::string text, ReadIndex(dir));
  MM_ASSIGN_OR_RETURN(mm::reader::internal::IndexDocument index,
                      mm::reader::internal::DecodeIndex(text, dir));
  const mm::reader::SetInfo& info = index.info;
  auto known = [](const std::string& s) { return s.empty() ? std::string("?") : s; };
  auto or0 = [](int64_t v) { return v < 0 ? int64_t{0} : v; };
  const int64_t samples = or0(index.totals.samples), captions = or0(index.totals.captions);
  const int64_t tokens = or0(index.totals.tokens), bytes = or0(index.totals.bytes);
  const int64_t shards = or0(index.totals.shards);
  const int64_t height = info.image_height, width = info.image_width;
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  out << std::fixed << std::setprecision(2);
  out << "set:          " << fs::absolute(root).lexically_normal().string() << "\n";
  out << "format:       " << format::kFormatName << " v" << info.format_version << " ("
      << known(index.created_by) << ")\n";
  out << "samples:      " << samples << " in " << shards << " shard" << (shards == 1 ? "" : "s")
      << "\n";
  out << "captions:     " << captions << " (" << ratio(captions, samples) << " per sample)\n";
  out << "tokens:       " << tokens << " (" << ratio(tokens, captions) << " per caption)\n";
  out << "bytes:        " << HumanBytes(static_cast<double>(bytes)) << " ("
      << HumanBytes(ratio(bytes, samples)) << " per sample)\n";
  out << "images:       " << width << "x" << height << "x" << info.channels << " uint8, resize "
      << known(info.resize_mode) << ", background " << known(index.background) << "\n";
  out << "compression:  " << info.compression;
  if (format::ParseCodec(info.compression) == format::Codec::kZstd) {
    out << " level " << info.compression_level << " (HDF5 filter "
        << (index.hdf5_filter_id >= 0 ? index.hdf5_filter_id : format::kZstdFilterId) << ")";
  }
  double raw = static_cast<double>(samples) * static_cast<double>(height * width * 3);
  if (bytes > 0 && raw > 0) out << ", raw pixels / file bytes " << ratio(raw, bytes);
  out << "\n";
  const std::string& sha = info.tokenizer_sha256;
  out << "tokenizer:    " << known(index.tokenizer_file) << " (sha256 "
      << sha.substr(0, std::min<size_t>(sha.size(), 16)) << (sha.size() > 16 ? "..." : "")
      << (index.tokenizer_trained ? ", trained on the captions" : ", pretrained") << "), vocab "
      << info.vocab_size << ", pad " << info.pad_id << ", unk " << info.unk_id << ", bos "
      << info.bos_id << ", eos " << info.eos_id << ", max tokens " << info.max_tokens << "\n";
  auto report = ReadJsonFile(root / format::kReportFile);
  // Counts by reason: the index's, or report.json's when the index has none.
  std::map<std::string, int64_t> by_reason = index.dropped_by_reason;
  if (by_reason.empty() && report.ok()) {
    const json reported = report->value("dropped_by_reason", json::object());
    if (reported.is_object()) {
      for (const auto& [reason, count] : reported.items()) {
        if (count.is_number_integer()) by_reason[reason] = count.get<int64_t>();
      }
    }
  }
  int64_t dropped_total = or0(index.dropped_total);
  if (dropped_total == 0) {
    for (const auto& [reason, count] : by_reason) dropped_total += count;
  }
  out << "dropped:      " << dropped_total;
  if (!by_reason.empty()) {
    out << " (";
    bool first = true;
    for (const auto& [reason, count] : by_reason) {
      out << (first ? "" : ", ") << reason << " " << count;
      first = false;
    }
    out << ")";
  }
  out << "\n";
  if (report.ok() && report->contains("truncated_captions")) {
    const json& truncated = (*report)["truncated_captions"];
    out << "truncated:    " << (truncated.is_number_integer() ? truncated.get<int64_t>() : 0)
        << " captions cut to max tokens (report.json)\n";
  }
  return Status::OK();
}

std::string EnvScript() {
  // The build tree's plugin folder; for an installed mmpack (bin/mmpack), the plugin that
  // `cmake --install` put in lib/hdf5/plugins beside it.
  std::string dir = MM_PLUGIN_DIR;
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / "libh5z_zstd.so", ec)) {
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    fs::path installed = exe.parent_path().parent_path() / "lib" / "hdf5" / "plugins";
    if (!ec && fs::exists(installed / "libh5z_zstd.so", ec)) dir = installed.string();
  }
  return "# mmpack: lets h5dump and h5py read zstd-compressed shards (HDF5 filter 32015)\n"
         "export HDF5_PLUGIN_PATH='" +
         dir + "'${HDF5_PLUGIN_PATH:+:$HDF5_PLUGIN_PATH}\n";
}

}  // namespace mm::pack
