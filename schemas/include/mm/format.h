// mm/format.h: constants of the mmpack shard format, version 1.
//
// The prose spec is schemas/FORMAT.md; the machine-readable form is schemas/shard_v1.json,
// embedded here by the build (SchemaJson()) so that the writer, `mmpack verify` and the
// reader check against the same text. Change the spec first, then these constants; bump
// kFormatVersion for any change an old reader would misread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mm::format {

inline constexpr std::string_view kFormatName = "mmpack-shard";
/// Version written by this build; the reader accepts versions in
/// [kMinReadableVersion, kFormatVersion] and names the version it cannot read.
inline constexpr int kFormatVersion = 1;
inline constexpr int kMinReadableVersion = 1;

/// HDF5 registered filter id of Zstandard (cd_values[0] = compression level), as in the HDF
/// Group's hdf5_plugins and h5py's hdf5plugin.
inline constexpr int kZstdFilterId = 32015;

/// Image chunk codec, part of the format: stored as ToString's text in index.json
/// ("compression.codec") and in every shard's "compression" attribute.
enum class Codec {
  kNone,  // "none": raw [H, W, 3] uint8 bytes, no HDF5 filter
  kZstd,  // "zstd": one Zstandard frame per chunk, HDF5 filter kZstdFilterId
};
constexpr std::string_view ToString(Codec codec) { return codec == Codec::kZstd ? "zstd" : "none"; }
inline constexpr Codec kCodecs[] = {Codec::kZstd, Codec::kNone};
/// The codec named `text` ("zstd" | "none"); nullopt for anything else.
constexpr std::optional<Codec> ParseCodec(std::string_view text) {
  for (Codec codec : kCodecs) {
    if (text == ToString(codec)) return codec;
  }
  return std::nullopt;
}

/// How an image was fitted to image_height x image_width, part of the format: stored as
/// ToString's text in index.json ("image.resize_mode") and every shard's "resize_mode".
enum class ResizeMode {
  kCenterCrop,  // "center-crop": cover the size, crop the middle
  kPad,         // "pad": contain, letterboxed on the background (valid_box says where)
  kStretch,     // "stretch": both axes scaled independently
};
constexpr std::string_view ToString(ResizeMode mode) {
  switch (mode) {
    case ResizeMode::kPad:
      return "pad";
    case ResizeMode::kStretch:
      return "stretch";
    case ResizeMode::kCenterCrop:
      break;
  }
  return "center-crop";
}
inline constexpr ResizeMode kResizeModes[] = {ResizeMode::kCenterCrop, ResizeMode::kPad,
                                              ResizeMode::kStretch};
/// The mode named `text` ("center-crop" | "pad" | "stretch"); nullopt for anything else.
constexpr std::optional<ResizeMode> ParseResizeMode(std::string_view text) {
  for (ResizeMode mode : kResizeModes) {
    if (text == ToString(mode)) return mode;
  }
  return std::nullopt;
}

inline constexpr std::string_view kIndexFile = "index.json";
inline constexpr std::string_view kReportFile = "report.json";
inline constexpr std::string_view kTokenizerFile = "tokenizer.model";
// Shard file names ("shard-000007.h5"): ShardFileName / ParseShardFileName in mm/filename.h.

// Dataset names (all at the root group of a shard).
inline constexpr const char* kImages = "images";
inline constexpr const char* kKeys = "keys";
inline constexpr const char* kSources = "sources";
inline constexpr const char* kOriginalSize = "original_size";
inline constexpr const char* kValidBox = "valid_box";
inline constexpr const char* kCaptionOffsets = "caption_offsets";
inline constexpr const char* kCaptions = "captions";
inline constexpr const char* kTokenOffsets = "token_offsets";
inline constexpr const char* kTokens = "tokens";
/// The optional group of manifest fields kept with `mmpack build --keep-fields`: one dataset
/// `metadata/<field>` of [N] values per field that index.json's "metadata.fields" lists.
inline constexpr const char* kMetadataGroup = "metadata";
/// The longest name of a kept field, in bytes (names are [A-Za-z0-9_.-]+, not "." or "..").
inline constexpr size_t kMaxMetadataFieldName = 128;

// Root attribute names.
inline constexpr const char* kAttrFormat = "format";
inline constexpr const char* kAttrFormatVersion = "format_version";
inline constexpr const char* kAttrShardIndex = "shard_index";
inline constexpr const char* kAttrNumSamples = "num_samples";
inline constexpr const char* kAttrNumCaptions = "num_captions";
inline constexpr const char* kAttrImageHeight = "image_height";
inline constexpr const char* kAttrImageWidth = "image_width";
inline constexpr const char* kAttrResizeMode = "resize_mode";
inline constexpr const char* kAttrCompression = "compression";
inline constexpr const char* kAttrTokenizerSha256 = "tokenizer_sha256";

/// The text of schemas/shard_v1.json, embedded at build time.
std::string_view SchemaJson();

}  // namespace mm::format
