// verifier.cc: see verifier.h.
#include "shard/verifier.h"

#include <turbojpeg.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/c_handles.h"
#include "mm/internal/set_rules.h"
#include "mm/internal/utf8.h"
#include "mm/internal/zstd_codec.h"
#include "shard/h5_util.h"

namespace mm::pack {
namespace {

using nlohmann::json;

// Resolves a schema shape entry ("N", "N+1", "C", "C+1", "T", "image_height", 3) to a number.
Result<int64_t> ResolveDim(const json& dim, const ShardExpectation& e) {
  if (dim.is_number_integer()) return dim.get<int64_t>();
  std::string s = dim.is_string() ? dim.get<std::string>() : "";
  if (s == "N") return e.samples;
  if (s == "N+1") return e.samples + 1;
  if (s == "C") return e.captions;
  if (s == "C+1") return e.captions + 1;
  if (s == "T") return e.tokens;
  if (s == "B") return e.jpeg_bytes;
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

// `dims` against the schema's `shape` (rank first, then each entry resolved); `what` names the
// dataset.
Status CheckDims(const std::vector<hsize_t>& dims, const json& shape, const ShardExpectation& e,
                 const std::string& what) {
  if (dims.size() != shape.size()) {
    return Status::Corruption(what + " has rank " + std::to_string(dims.size()) +
                              ", the schema says " + std::to_string(shape.size()));
  }
  for (size_t k = 0; k < dims.size(); ++k) {
    MM_ASSIGN_OR_RETURN(int64_t want, ResolveDim(shape[k], e));
    if (static_cast<int64_t>(dims[k]) != want) {
      return Status::Corruption(what + " dimension " + std::to_string(k) + " is " +
                                std::to_string(dims[k]) + ", expected " + std::to_string(want) +
                                " (" + shape[k].dump() + ")");
    }
  }
  return Status::OK();
}

// The schema's layout: contiguous, or chunked with its chunk shape.
Status CheckLayout(hid_t dcpl, const json& d, size_t rank, const ShardExpectation& e,
                   const std::string& name) {
  const H5D_layout_t layout = H5Pget_layout(dcpl);
  const std::string want_layout = d.value("layout", "any");
  if (want_layout == "contiguous" && layout != H5D_CONTIGUOUS) {
    return Status::Corruption("dataset '" + name + "' is not contiguous");
  }
  if (want_layout != "chunked") return Status::OK();
  if (layout != H5D_CHUNKED) return Status::Corruption("dataset '" + name + "' is not chunked");
  std::vector<hsize_t> chunk(rank);
  H5Pget_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
  const auto& want_chunk = d["chunk"];
  for (size_t k = 0; k < chunk.size() && k < want_chunk.size(); ++k) {
    MM_ASSIGN_OR_RETURN(int64_t want, ResolveDim(want_chunk[k], e));
    if (static_cast<int64_t>(chunk[k]) != want) {
      return Status::Corruption("dataset '" + name + "' chunk dimension " + std::to_string(k) +
                                " is " + std::to_string(chunk[k]) + ", expected " +
                                std::to_string(want));
    }
  }
  return Status::OK();
}

// The filter the codec implies: zstd (32015) alone, or none.
Status CheckFilter(hid_t dcpl, format::Codec codec, const std::string& name) {
  const bool has_zstd = H5Pget_filter_by_id2(dcpl, format::kZstdFilterId, nullptr, nullptr, nullptr,
                                             0, nullptr, nullptr) >= 0;
  h5::ClearErrors();  // a "filter not found" entry
  const int nfilters = H5Pget_nfilters(dcpl);
  if (codec == format::Codec::kZstd && (!has_zstd || nfilters != 1)) {
    return Status::Corruption("dataset '" + name + "' lacks the zstd filter (32015) alone");
  }
  if (codec == format::Codec::kNone && nfilters != 0) {
    return Status::Corruption("dataset '" + name + "' has filters but compression is none");
  }
  return Status::OK();
}

// caption_offsets run from 0 to C, strictly increasing (every sample has a caption);
// token_offsets from 0 to T, never decreasing; every token id inside the vocabulary.
Status CheckOffsetsAndTokens(hid_t file, const ShardExpectation& e,
                             std::vector<int64_t>* caption_offsets_out, int64_t* sample) {
  const size_t n = static_cast<size_t>(e.samples);
  const size_t c = static_cast<size_t>(e.captions);
  MM_ASSIGN_OR_RETURN(auto caption_offsets, h5::ReadNumeric<int64_t>(file, format::kCaptionOffsets,
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
  // The sample holding caption `k`.
  auto sample_of = [&](int64_t k) {
    auto it = std::upper_bound(caption_offsets.begin(), caption_offsets.end(), k);
    return static_cast<int64_t>(it - caption_offsets.begin()) - 1;
  };
  MM_ASSIGN_OR_RETURN(auto token_offsets, h5::ReadNumeric<int64_t>(file, format::kTokenOffsets,
                                                                   H5T_NATIVE_INT64, c + 1));
  if (token_offsets.front() != 0 || token_offsets.back() != e.tokens) {
    return Status::Corruption("token_offsets must run from 0 to " + std::to_string(e.tokens));
  }
  for (size_t k = 0; k < c; ++k) {
    if (token_offsets[k + 1] < token_offsets[k]) {
      *sample = sample_of(static_cast<int64_t>(k));
      return Status::Corruption("token_offsets decrease at caption " + std::to_string(k));
    }
  }
  MM_ASSIGN_OR_RETURN(auto tokens, h5::ReadNumeric<int32_t>(file, format::kTokens, H5T_NATIVE_INT32,
                                                            static_cast<size_t>(e.tokens)));
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || (e.vocab_size > 0 && tokens[t] >= e.vocab_size)) {
      auto ct =
          std::upper_bound(token_offsets.begin(), token_offsets.end(), static_cast<int64_t>(t));
      *sample = sample_of(static_cast<int64_t>(ct - token_offsets.begin()) - 1);
      return Status::Corruption("token id " + std::to_string(tokens[t]) +
                                " outside the vocabulary of " + std::to_string(e.vocab_size));
    }
  }
  *caption_offsets_out = std::move(caption_offsets);
  return Status::OK();
}

// Sources UTF-8; captions non-empty UTF-8.
Status CheckTexts(hid_t file, const ShardExpectation& e,
                  const std::vector<int64_t>& caption_offsets, int64_t* sample) {
  const size_t n = static_cast<size_t>(e.samples);
  MM_ASSIGN_OR_RETURN(auto sources, h5::ReadVlenStrings(file, format::kSources, n));
  for (size_t i = 0; i < n; ++i) {
    if (!IsValidUtf8(sources[i])) {
      *sample = static_cast<int64_t>(i);
      return Status::Corruption("source is not valid UTF-8");
    }
  }
  MM_ASSIGN_OR_RETURN(
      auto captions, h5::ReadVlenStrings(file, format::kCaptions, static_cast<size_t>(e.captions)));
  for (size_t i = 0; i < n; ++i) {
    for (int64_t k = caption_offsets[i]; k < caption_offsets[i + 1]; ++k) {
      const std::string& caption = captions[static_cast<size_t>(k)];
      if (caption.empty() || !IsValidUtf8(caption)) {
        *sample = static_cast<int64_t>(i);
        return Status::Corruption("caption " + std::to_string(k) + " is empty or not UTF-8");
      }
    }
  }
  return Status::OK();
}

// One stored JPEG: its header states `width` x `height`, and it decodes whole without a libjpeg
// warning (damaged entropy data, truncation).
Status CheckJpeg(const std::vector<uint8_t>& jpeg, int width, int height) {
  thread_local TjHandlePtr handle(tjInitDecompress());
  tjhandle tj = handle.get();
  if (tj == nullptr) return Status::Internal("TurboJPEG: cannot create a decompressor");
  int w = 0, h = 0, subsamp = 0, colourspace = 0;
  const auto size = static_cast<unsigned long>(jpeg.size());
  if (tjDecompressHeader3(tj, jpeg.data(), size, &w, &h, &subsamp, &colourspace) != 0) {
    return Status::Corruption(std::string("JPEG header: ") + tjGetErrorStr2(tj));
  }
  if (colourspace == TJCS_CMYK || colourspace == TJCS_YCCK) {  // the reader refuses them
    return Status::Corruption("JPEG is CMYK/YCCK; stored JPEGs are YCbCr, RGB or grey");
  }
  if (w != width || h != height) {
    return Status::Corruption("JPEG is " + std::to_string(w) + "x" + std::to_string(h) +
                              ", image_size says " + std::to_string(width) + "x" +
                              std::to_string(height));
  }
  thread_local std::vector<uint8_t> pixels;
  pixels.resize(static_cast<size_t>(w) * h * 3);
  if (tjDecompress2(tj, jpeg.data(), size, pixels.data(), w, 0, h, TJPF_RGB,
                    TJFLAG_STOPONWARNING) != 0) {
    return Status::Corruption(std::string("JPEG does not decode: ") + tjGetErrorStr2(tj));
  }
  return Status::OK();
}

// The set-level facts CheckImageSizes needs, from the expectation.
mm::reader::SetInfo SizeRules(const ShardExpectation& e) {
  mm::reader::SetInfo info;
  info.image_width = static_cast<int>(e.width);
  info.image_height = static_cast<int>(e.height);
  info.resize_mode = e.resize_mode;
  info.max_size = e.max_size;
  return info;
}

// Whether schema entry `d` (a dataset or attribute) applies to a shard of codec `codec`.
bool ForCodec(const json& d, format::ImageCodec codec) {
  return !d.contains("codec") || d["codec"].get<std::string>() == ToString(codec);
}

// original_size positive; valid_box inside the image (its stored size: image_size for jpeg).
Status CheckGeometry(hid_t file, const ShardExpectation& e, int64_t* sample) {
  const size_t n = static_cast<size_t>(e.samples);
  MM_ASSIGN_OR_RETURN(
      auto sizes, h5::ReadNumeric<int32_t>(file, format::kOriginalSize, H5T_NATIVE_INT32, n * 2));
  for (size_t i = 0; i < n; ++i) {
    if (sizes[2 * i] <= 0 || sizes[2 * i + 1] <= 0) {
      *sample = static_cast<int64_t>(i);
      return Status::Corruption("original_size is not positive");
    }
  }
  MM_ASSIGN_OR_RETURN(auto boxes,
                      h5::ReadNumeric<int32_t>(file, format::kValidBox, H5T_NATIVE_INT32, n * 4));
  std::vector<int32_t> stored;  // [N, 2] codec jpeg: each image's own size
  if (e.codec == format::ImageCodec::kJpeg) {
    MM_ASSIGN_OR_RETURN(stored,
                        h5::ReadNumeric<int32_t>(file, format::kImageSize, H5T_NATIVE_INT32, n * 2));
    MM_RETURN_NOT_OK(
        mm::reader::CheckImageSizes(e.file, stored.data(), e.samples, SizeRules(e)));
  }
  for (size_t i = 0; i < n; ++i) {
    const int32_t* b = &boxes[i * 4];
    const int64_t w = stored.empty() ? e.width : stored[2 * i];
    const int64_t h = stored.empty() ? e.height : stored[2 * i + 1];
    if (b[0] < 0 || b[1] < 0 || b[2] <= 0 || b[3] <= 0 || b[0] + b[2] > w || b[1] + b[3] > h) {
      *sample = static_cast<int64_t>(i);
      return Status::Corruption("valid_box outside the image");
    }
  }
  return Status::OK();
}

}  // namespace

Status ShardVerifier::Verify(const std::string& path, const ShardExpectation& e, int64_t* sample) {
  *sample = -1;
  MM_ASSIGN_OR_RETURN(h5::File file,
                      h5::Own<h5::File>(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                                        "not a readable HDF5 file", StatusCode::kCorruption));
  MM_RETURN_NOT_OK(CheckAttributes(file.get(), e));
  ShardExpectation with_bytes = e;
  std::vector<int64_t> offsets;  // codec jpeg: image_offsets, read once
  if (e.codec == format::ImageCodec::kJpeg) {  // "B", image_bytes' length, from image_offsets
    MM_ASSIGN_OR_RETURN(offsets, h5::ReadNumeric<int64_t>(file.get(), format::kImageOffsets,
                                                          H5T_NATIVE_INT64,
                                                          static_cast<size_t>(e.samples) + 1));
    with_bytes.jpeg_bytes = offsets.back();
  }
  for (const auto& d : schema_["datasets"]) {
    if (ForCodec(d, e.codec)) MM_RETURN_NOT_OK(CheckDataset(file.get(), d, with_bytes));
  }
  const htri_t other = H5Lexists(
      file.get(), e.codec == format::ImageCodec::kJpeg ? format::kImages : format::kImageBytes,
      H5P_DEFAULT);
  if (other != 0) {
    h5::ClearErrors();
    return Status::Corruption(std::string("a ") + std::string(ToString(e.codec)) +
                              " shard holds a dataset of the other codec");
  }
  MM_RETURN_NOT_OK(CheckTables(file.get(), e, sample));
  MM_RETURN_NOT_OK(CheckMetadata(file.get(), e, sample));
  if (e.codec == format::ImageCodec::kJpeg) return CheckJpegs(file.get(), e, offsets, sample);
  return CheckChunks(file.get(), e, sample);
}

// The kept fields (FORMAT.md "Kept fields"): a group `metadata` exactly when index.json lists
// fields, holding exactly those, each a contiguous [N] dataset of int64 LE, float64 LE or
// variable-length UTF-8 strings (valid UTF-8).
Status ShardVerifier::CheckMetadata(hid_t file, const ShardExpectation& e, int64_t* sample) {
  const htri_t has_group = H5Lexists(file, format::kMetadataGroup, H5P_DEFAULT);
  if (has_group < 0) return h5::ErrorFromStack(StatusCode::kCorruption, "link 'metadata'");
  if (e.metadata_fields.empty()) {
    if (has_group > 0) {
      return Status::Corruption("group 'metadata' exists but index.json lists no kept field");
    }
    return Status::OK();
  }
  if (has_group == 0) return Status::Corruption("group 'metadata' (kept fields) is missing");
  MM_ASSIGN_OR_RETURN(h5::Group group,
                      h5::Own<h5::Group>(H5Gopen2(file, format::kMetadataGroup, H5P_DEFAULT),
                                         "opening group 'metadata'", StatusCode::kCorruption));
  H5G_info_t info;
  if (H5Gget_info(group.get(), &info) < 0) {
    return h5::ErrorFromStack(StatusCode::kCorruption, "group 'metadata'");
  }
  if (info.nlinks != e.metadata_fields.size()) {
    return Status::Corruption("group 'metadata' holds " + std::to_string(info.nlinks) +
                              " links, index.json lists " +
                              std::to_string(e.metadata_fields.size()) + " kept fields");
  }
  const size_t n = static_cast<size_t>(e.samples);
  for (const std::string& field : e.metadata_fields) {
    const std::string name = "metadata/" + field;
    MM_ASSIGN_OR_RETURN(h5::Dataset d, h5::OpenDataset(group.get(), field.c_str()));
    MM_ASSIGN_OR_RETURN(auto dims, h5::DatasetDims(d.get()));
    if (dims.size() != 1 || dims[0] != n) {
      return Status::Corruption("dataset '" + name + "' is not [" + std::to_string(n) + "]");
    }
    MM_ASSIGN_OR_RETURN(h5::PropList dcpl,
                        h5::Own<h5::PropList>(H5Dget_create_plist(d.get()), "dcpl"));
    if (H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS) {
      return Status::Corruption("dataset '" + name + "' is not contiguous");
    }
    MM_ASSIGN_OR_RETURN(h5::Datatype type,
                        h5::Own<h5::Datatype>(H5Dget_type(d.get()), "H5Dget_type"));
    const auto column = mm::reader::MetadataColumnType(type.get());
    if (column == mm::reader::MetadataValue::Type::kInt ||
        column == mm::reader::MetadataValue::Type::kUint ||
        column == mm::reader::MetadataValue::Type::kFloat) {
      continue;
    }
    if (column != mm::reader::MetadataValue::Type::kString) {
      return Status::Corruption("dataset '" + name +
                                "' is not int64 LE, uint64 LE, float64 LE or variable-length "
                                "UTF-8");
    }
    MM_ASSIGN_OR_RETURN(auto values, h5::ReadVlenStrings(group.get(), field.c_str(), n));
    for (size_t i = 0; i < n; ++i) {
      if (!IsValidUtf8(values[i])) {
        *sample = static_cast<int64_t>(i);
        return Status::Corruption("dataset '" + name + "' value " + std::to_string(i) +
                                  " is not valid UTF-8");
      }
    }
  }
  return Status::OK();
}

Status ShardVerifier::CheckAttributes(hid_t file, const ShardExpectation& e) {
  for (const auto& a : schema_["root_attributes"]) {
    if (!ForCodec(a, e.codec)) continue;
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
      if (name == format::kAttrResizeMode && value != e.resize_mode_text) {
        return Status::Corruption("attribute 'resize_mode' is '" + value + "', the index says '" +
                                  e.resize_mode_text + "'");
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
      if (a.contains("values")) {
        const auto& allowed = a["values"];
        if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
          return Status::Unsupported("attribute '" + name + "' is " + std::to_string(value) +
                                     ", this build reads " + allowed.dump());
        }
      }
      int64_t want = -1;
      if (name == format::kAttrFormatVersion) want = e.format_version;
      if (name == format::kAttrJpegQuality) want = e.jpeg_quality;
      if (name == format::kAttrMaxSize) want = e.max_size;
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

Status ShardVerifier::CheckDataset(hid_t file, const json& d, const ShardExpectation& e) {
  const std::string name = d.value("name", "");
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
  MM_RETURN_NOT_OK(CheckDims(dims, d["shape"], e, "dataset '" + name + "'"));
  MM_ASSIGN_OR_RETURN(h5::PropList dcpl,
                      h5::Own<h5::PropList>(H5Dget_create_plist(dset.get()), "dcpl"));
  MM_RETURN_NOT_OK(CheckLayout(dcpl.get(), d, dims.size(), e, name));
  if (d.contains("filter") && e.codec == format::ImageCodec::kRaw) MM_RETURN_NOT_OK(CheckFilter(dcpl.get(), e.compression, name));
  return Status::OK();
}

Status ShardVerifier::CheckTables(hid_t file, const ShardExpectation& e, int64_t* sample) {
  std::vector<int64_t> caption_offsets;
  MM_RETURN_NOT_OK(CheckOffsetsAndTokens(file, e, &caption_offsets, sample));
  MM_RETURN_NOT_OK(CheckKeys(file, e, sample));
  MM_RETURN_NOT_OK(CheckTexts(file, e, caption_offsets, sample));
  return CheckGeometry(file, e, sample);
}

Status ShardVerifier::CheckKeys(hid_t file, const ShardExpectation& e, int64_t* sample) {
  const size_t n = static_cast<size_t>(e.samples);
  MM_ASSIGN_OR_RETURN(auto keys, h5::ReadFixedStrings(file, format::kKeys, n));
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
  return Status::OK();
}

// Codec jpeg: image_offsets from 0 strictly increasing to B, image_size within the set's rules,
// and every JPEG decoded whole (TurboJPEG, stopping at the first warning) to the size its row
// of image_size states.
Status ShardVerifier::CheckJpegs(hid_t file, const ShardExpectation& e,
                                 const std::vector<int64_t>& offsets, int64_t* sample) {
  const size_t n = static_cast<size_t>(e.samples);
  MM_ASSIGN_OR_RETURN(auto sizes,
                      h5::ReadNumeric<int32_t>(file, format::kImageSize, H5T_NATIVE_INT32, n * 2));
  if (offsets[0] != 0) return Status::Corruption("image_offsets[0] is not 0");
  for (size_t i = 0; i < n; ++i) {
    if (offsets[i + 1] <= offsets[i]) {
      *sample = static_cast<int64_t>(i);
      return Status::Corruption("image_offsets do not increase (an empty JPEG)");
    }
  }
  MM_ASSIGN_OR_RETURN(h5::Dataset bytes,
                      h5::Own<h5::Dataset>(H5Dopen2(file, format::kImageBytes, H5P_DEFAULT),
                                           "opening image_bytes", StatusCode::kCorruption));
  MM_ASSIGN_OR_RETURN(h5::Dataspace space,
                      h5::Own<h5::Dataspace>(H5Dget_space(bytes.get()), "H5Dget_space"));
  std::vector<uint8_t> jpeg;
  for (size_t i = 0; i < n; ++i) {
    *sample = static_cast<int64_t>(i);
    const hsize_t start[1] = {static_cast<hsize_t>(offsets[i])};
    const hsize_t count[1] = {static_cast<hsize_t>(offsets[i + 1] - offsets[i])};
    jpeg.resize(static_cast<size_t>(count[0]));
    MM_ASSIGN_OR_RETURN(h5::Dataspace mem,
                        h5::Own<h5::Dataspace>(H5Screate_simple(1, count, nullptr), "H5S"));
    MM_RETURN_NOT_OK(h5::Check(
        H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr),
        "selecting a JPEG", StatusCode::kCorruption));
    MM_RETURN_NOT_OK(h5::Check(H5Dread(bytes.get(), H5T_NATIVE_UINT8, mem.get(), space.get(),
                                       H5P_DEFAULT, jpeg.data()),
                               "reading a JPEG", StatusCode::kCorruption));
    MM_RETURN_NOT_OK(CheckJpeg(jpeg, sizes[2 * i], sizes[2 * i + 1]));
  }
  *sample = -1;
  return Status::OK();
}

Status ShardVerifier::CheckChunks(hid_t file, const ShardExpectation& e, int64_t* sample) {
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

}  // namespace mm::pack
