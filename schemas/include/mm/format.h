// mm/format.h: constants of the mmpack shard format, versions 1 and 2.
//
// The prose spec is schemas/FORMAT.md; the machine-readable form is schemas/shard_v2.json
// (version 2, which holds version 1: schemas/shard_v1.json is version 1's, kept as published),
// embedded here by the build (SchemaJson()) so that the writer, `mmpack verify` and the
// reader check against the same text. Change the spec first, then these constants; bump
// kFormatVersion for any change an old reader would misread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace mm::format {

inline constexpr std::string_view kFormatName = "mmpack-shard";
/// Newest version this build reads and writes; the reader accepts versions in
/// [kMinReadableVersion, kFormatVersion] and names the version it cannot read. `mmpack build`
/// writes the lowest version that holds the set (FormatVersionFor): 1 for raw pixels, 2 for
/// stored JPEGs, so a raw set stays readable by version-1 readers.
inline constexpr int kFormatVersion = 2;
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

/// How an image was fitted, part of the format: stored as ToString's text in index.json
/// ("image.resize_mode") and every shard's "resize_mode". The first three give every image
/// image_height x image_width; the keep-ratio modes (format 2, codec jpeg only) keep each
/// image's aspect ratio, scaled down (never up) so that one side is at most max_size, with each
/// stored size in the image_size table (img2dataset's names for the same modes).
enum class ResizeMode {
  kCenterCrop,        // "center-crop": cover the size, crop the middle
  kPad,               // "pad": contain, letterboxed on the background (valid_box says where)
  kStretch,           // "stretch": both axes scaled independently
  kKeepRatio,         // "keep-ratio": shorter side <= max_size (torchvision's Resize(int))
  kKeepRatioLargest,  // "keep-ratio-largest": longer side <= max_size (FFCV's max_resolution)
};
constexpr std::string_view ToString(ResizeMode mode) {
  switch (mode) {
    case ResizeMode::kPad:
      return "pad";
    case ResizeMode::kStretch:
      return "stretch";
    case ResizeMode::kKeepRatio:
      return "keep-ratio";
    case ResizeMode::kKeepRatioLargest:
      return "keep-ratio-largest";
    case ResizeMode::kCenterCrop:
      break;
  }
  return "center-crop";
}
/// Whether every image of a set in `mode` has the set's image_height x image_width.
constexpr bool IsFixedSize(ResizeMode mode) {
  return mode != ResizeMode::kKeepRatio && mode != ResizeMode::kKeepRatioLargest;
}
inline constexpr ResizeMode kResizeModes[] = {ResizeMode::kCenterCrop, ResizeMode::kPad,
                                              ResizeMode::kStretch, ResizeMode::kKeepRatio,
                                              ResizeMode::kKeepRatioLargest};
/// The mode named `text` ("center-crop" | "pad" | "stretch"); nullopt for anything else.
constexpr std::optional<ResizeMode> ParseResizeMode(std::string_view text) {
  for (ResizeMode mode : kResizeModes) {
    if (text == ToString(mode)) return mode;
  }
  return std::nullopt;
}

/// How each image is stored, part of the format: index.json "image.codec" (absent in version 1:
/// raw) and every version-2 shard's "image_codec".
enum class ImageCodec {
  kRaw,   // "raw": [N, H, W, 3] uint8 pixels in `images`, one chunk a sample (Codec: zstd/none)
  kJpeg,  // "jpeg": one baseline JPEG a sample in `image_bytes`, ranges in `image_offsets`
};
constexpr std::string_view ToString(ImageCodec codec) {
  return codec == ImageCodec::kJpeg ? "jpeg" : "raw";
}
inline constexpr ImageCodec kImageCodecs[] = {ImageCodec::kRaw, ImageCodec::kJpeg};
/// The codec named `text` ("raw" | "jpeg"); nullopt for anything else.
constexpr std::optional<ImageCodec> ParseImageCodec(std::string_view text) {
  for (ImageCodec codec : kImageCodecs) {
    if (text == ToString(codec)) return codec;
  }
  return std::nullopt;
}
/// The format version a set of `codec` is written as: the lowest that holds it.
constexpr int FormatVersionFor(ImageCodec codec) { return codec == ImageCodec::kJpeg ? 2 : 1; }
/// `--quality` of `--codec jpeg` when not given (libjpeg's scale, 1..100), as FFCV's and
/// Pillow's usual 90.
inline constexpr int kDefaultJpegQuality = 90;
/// Chroma subsampling of stored JPEGs: 4:2:0 (FFCV's, OpenCV's and Pillow's default at this
/// quality; index.json "image.chroma_subsampling").
inline constexpr std::string_view kJpegSubsampling = "4:2:0";

inline constexpr std::string_view kIndexFile = "index.json";
inline constexpr std::string_view kReportFile = "report.json";
inline constexpr std::string_view kTokenizerFile = "tokenizer.model";

/// The kind of tokenizer whose ids a set holds (index.json "tokenizer.kind"; absent means
/// sentencepiece) and the file the set carries it in (index.json "tokenizer.file").
enum class TokenizerKind {
  kSentencePiece,  // "sentencepiece": a SentencePiece ModelProto, tokenizer.model
  kClipBpe,        // "clip-bpe": OpenAI CLIP's BPE merges (bpe_simple_vocab_16e6.txt.gz)
  kTokenizerJson,  // "tokenizer-json": a Hugging Face tokenizers file, tokenizer.json
};
constexpr std::string_view ToString(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::kClipBpe:
      return "clip-bpe";
    case TokenizerKind::kTokenizerJson:
      return "tokenizer-json";
    default:
      return "sentencepiece";
  }
}
inline constexpr TokenizerKind kTokenizerKinds[] = {
    TokenizerKind::kSentencePiece, TokenizerKind::kClipBpe, TokenizerKind::kTokenizerJson};
/// The kind named `text`; nullopt for anything else.
constexpr std::optional<TokenizerKind> ParseTokenizerKind(std::string_view text) {
  for (TokenizerKind kind : kTokenizerKinds) {
    if (text == ToString(kind)) return kind;
  }
  return std::nullopt;
}
/// The name of the tokenizer's file in a set that `mmpack build` writes.
constexpr std::string_view TokenizerFileName(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::kClipBpe:
      return "bpe_simple_vocab.txt.gz";
    case TokenizerKind::kTokenizerJson:
      return "tokenizer.json";
    default:
      return kTokenizerFile;
  }
}
// Shard file names ("shard-000007.h5"): ShardFileName / ParseShardFileName in mm/filename.h.

// Dataset names (all at the root group of a shard).
inline constexpr const char* kImages = "images";  // codec raw
// Codec jpeg (format 2), instead of `images`: the JPEG of sample i is
// image_bytes[image_offsets[i] : image_offsets[i + 1]], its width and height image_size[i].
inline constexpr const char* kImageBytes = "image_bytes";
inline constexpr const char* kImageOffsets = "image_offsets";
inline constexpr const char* kImageSize = "image_size";
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
// Format 2, codec jpeg only.
inline constexpr const char* kAttrImageCodec = "image_codec";
inline constexpr const char* kAttrJpegQuality = "jpeg_quality";
inline constexpr const char* kAttrMaxSize = "max_size";

/// The text of schemas/shard_v2.json, embedded at build time.
std::string_view SchemaJson();

}  // namespace mm::format
