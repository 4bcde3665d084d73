// mm/format.h: constants of the mmpack shard format, version 1.
//
// The prose spec is schemas/FORMAT.md; the machine-readable form is schemas/shard_v1.json,
// embedded here by the build (SchemaJson()) so that the writer, `mmpack verify` and the
// reader check against the same text. Change the spec first, then these constants; bump
// kFormatVersion for any change an old reader would misread.
#pragma once

#include <cstdint>
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

inline constexpr std::string_view kIndexFile = "index.json";
inline constexpr std::string_view kReportFile = "report.json";
inline constexpr std::string_view kTokenizerFile = "tokenizer.model";
/// Shard file name for shard i: "shard-%06d.h5".
inline constexpr std::string_view kShardPrefix = "shard-";
inline constexpr std::string_view kShardSuffix = ".h5";

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
