// build_cli.cc: see build_cli.h.
#include "commands/build_cli.h"

#include <algorithm>
#include <cctype>
#include <iostream>
#include <vector>

#include "curate/filters.h"
#include "mm/format.h"
#include "mm/internal/byte_size.h"
#include "mm/internal/set_rules.h"
#include "mm/reader.h"
#include "text/normalize.h"

namespace mm::pack::cli {
namespace {

// The ToString names of every value of an option's enum, in declaration order.
template <typename Enum, size_t N>
std::vector<std::string> Names(const Enum (&all)[N]) {
  std::vector<std::string> names;
  for (Enum value : all) names.emplace_back(ToString(value));
  return names;
}

// "224" -> 224x224; "320x240" -> width 320, height 240.
bool ParseImageSize(const std::string& text, int* width, int* height) {
  auto x = text.find_first_of("xX");
  try {
    size_t used = 0;
    if (x == std::string::npos) {
      *width = *height = std::stoi(text, &used);
      return used == text.size() && *width > 0;
    }
    *width = std::stoi(text.substr(0, x), &used);
    if (used != x) return false;
    std::string rest = text.substr(x + 1);
    *height = std::stoi(rest, &used);
    return used == rest.size() && *width > 0 && *height > 0;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

// "1GiB", "256MB", "500M", "4096" -> bytes (mm/internal/byte_size.h).
bool ParseBytes(const std::string& text, int64_t* bytes) {
  mm::Result<int64_t> parsed = mm::ParseByteSize(text);
  if (!parsed.ok()) return false;
  *bytes = *parsed;
  return true;
}

// --lowercase ... --dedup: text normalisation, field mapping and filters (curate/filters.h).
void AddCurate(CLI::App* b, BuildArgs* a) {
  mm::pack::BuildOptions& o = a->options;
  mm::pack::FilterOptions& f = o.filters;
  b->add_flag("--lowercase", o.text.lowercase,
              "Lowercase captions before tokenizing (stored as given); ALBERT's model needs it");
  b->add_option("--normalize", a->normalize, "Unicode normalisation before tokenizing")
      ->check(CLI::IsMember(Names(mm::pack::kTextNormalizations)))
      ->capture_default_str();
  b->add_option("--image-field", o.fields.image,
                "JSONL key / CSV column of the image path (repeatable or a,b: first present)")
      ->delimiter(',');
  b->add_option(
       "--caption-field", o.fields.caption,
       "JSONL key / CSV column / tar .json key of a caption (repeatable or a,b: every one present)")
      ->delimiter(',');
  b->add_option("--min-size", f.min_size, "Drop images whose shorter side is below this (pixels)")
      ->check(CLI::NonNegativeNumber);
  b->add_option("--max-aspect", f.max_aspect, "Drop images with longer/shorter side above this")
      ->check(CLI::NonNegativeNumber);
  b->add_option("--min-tokens", f.min_tokens, "Drop captions of fewer tokens (bos/eos excluded)")
      ->check(CLI::NonNegativeNumber);
  b->add_flag("--drop-long-captions", f.drop_long_captions,
              "Drop captions over --max-tokens instead of truncating them");
  b->add_option(
       "--keep-fields", o.keep_fields,
       "JSONL keys / CSV columns / tar .json keys stored per sample as metadata/<name> (a,b,c)")
      ->delimiter(',');
  b->add_option("--min-score", a->min_score,
                "FIELD=VALUE: drop samples whose manifest FIELD is missing or below VALUE");
  b->add_option("--dedup", a->dedup, "Drop duplicate images: exact pixels, or perceptual hash")
      ->check(CLI::IsMember(Names(mm::pack::kDedupModes)))
      ->capture_default_str();
  b->add_option("--dedup-threshold", f.near_threshold,
                "--dedup near: Hamming distance of 64-bit pHashes counted as duplicate")
      ->check(CLI::Range(0, 32))
      ->capture_default_str();
}

CLI::App* AddBuild(CLI::App& app, BuildArgs* a) {
  mm::pack::BuildOptions& o = a->options;
  auto* b = app.add_subcommand("build",
                               "Compile RAW (folder, JSONL, CSV/TSV, COCO JSON, tars) into shards");
  b->add_option(
       "input", o.input,
       "Folder of pairs, manifest (.jsonl/.csv/.tsv/.json), .tar or brace list (s-{000..009}.tar); "
       "'-' with --input-format feed: samples streamed on stdin by mmpack.Writer")
      ->required();
  b->add_option("-o,--output", o.output, "Output directory for shards")->required();
  b->add_option("--input-format", a->input_format, "Input format (auto: detect)")
      ->check(CLI::IsMember(Names(mm::pack::kInputFormats)))
      ->capture_default_str();
  b->add_flag("--overwrite", o.overwrite, "Replace an existing output directory");
  b->add_flag("--append", o.append,
              "Add RAW's samples to the existing set OUT as new shards (same image options, "
              "tokenizer and caption options; keys already in OUT are dropped as duplicate_key)");
  b->add_flag("--resume", o.resume,
              "Continue the interrupted build of OUT (same command): keep its finished shards, "
              "build the rest; with nothing to continue, build from the start");
  b->add_option("--part", o.part,
                "I/N: build part I (0-based) of N into OUT's shared staging folder; the last part "
                "to finish writes the set (the same bytes as one process). auto: the rank and "
                "size of mpirun or srun. Without it, one process builds the whole input");
  a->image_size_option =
      b->add_option("--image-size", a->image_size, "Output size: N (NxN) or WxH, pixels")
          ->capture_default_str();
  b->add_option("--resize-mode", a->resize_mode,
                "How to fit the image to the size; keep-ratio[-largest]: its own aspect ratio, "
                "shorter [longer] side at most --max-size (needs --codec jpeg)")
      ->check(CLI::IsMember(Names(mm::format::kResizeModes)))
      ->capture_default_str();
  b->add_option("--max-size", o.max_size,
                "keep-ratio modes: bound of the shorter (keep-ratio) or longer side, pixels; "
                "never upscales")
      ->check(CLI::Range(1, mm::reader::kMaxImageSide));
  b->add_option("--codec", a->codec,
                "How images are stored: raw pixels (zero decode) or JPEG (format 2, 5-8x smaller)")
      ->check(CLI::IsMember(Names(mm::format::kImageCodecs)))
      ->capture_default_str();
  a->quality_option =
      b->add_option("--quality", o.jpeg_quality, "--codec jpeg: JPEG quality, 1..100 (4:2:0)")
          ->check(CLI::Range(1, 100))
          ->capture_default_str();
  b->add_option("--background", o.background,
                "Colour behind alpha and padding: white, black, gray, #rrggbb or r,g,b")
      ->capture_default_str();
  b->add_option("--max-pixels", o.max_pixels,
                "Skip images with more pixels than this (read from the header)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  b->add_option("--max-caption-bytes", o.max_caption_bytes,
                "Skip captions longer than this many bytes (caption_too_large)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  b->add_option("--tokenizer", o.tokenizer,
                "Tokenizer file, told by its content: SentencePiece .model, CLIP's "
                "bpe_simple_vocab_16e6.txt.gz or a Hugging Face tokenizer.json (default: train "
                "a SentencePiece model on the captions), or 'none': captions as text only")
      ->check(CLI::IsMember({std::string(mm::pack::kNoTokenizer)}) | CLI::ExistingFile);
  b->add_option("--vocab-size", o.vocab_size, "Vocabulary size when training a tokenizer")
      ->check(CLI::Range(16, 1 << 20))
      ->capture_default_str();
  b->add_option("--tokenizer-sample", o.tokenizer_sample,
                "Train a tokenizer on at most this many captions (a seeded reservoir sample)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  b->add_option("--max-tokens", o.max_tokens, "Tokens per caption, bos/eos included")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  b->add_option("--shard-size", a->shard_size, "Close a shard at this size (e.g. 1GiB, 256MB)")
      ->capture_default_str();
  b->add_option("--samples-per-shard", o.samples_per_shard,
                "Close a shard after this many samples (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  a->compression_option =
      b->add_option("--compression", a->compression, "--codec raw: image chunk compression")
          ->check(CLI::IsMember(Names(mm::format::kCodecs)))
          ->capture_default_str();
  a->level_option =
      b->add_option("--compression-level", o.compression_level,
                    "zstd level: 1..22, or negative for zstd's fast levels (-N is --fast=N); "
                    "alone, it implies --compression zstd")
          ->check(CLI::Range(-(1 << 17), 22))
          ->capture_default_str();
  b->add_option("-j,--threads", o.threads, "Worker threads (0: all cores)")
      ->check(CLI::NonNegativeNumber);
  b->add_flag("-q,--quiet", o.quiet, "Print only errors and the summary");
  AddCurate(b, a);
  return b;
}

bool FinishBuild(BuildArgs* a) {
  mm::pack::BuildOptions& o = a->options;
  if (!ParseImageSize(a->image_size, &o.image_width, &o.image_height)) {
    std::cerr << "mmpack build: --image-size must be N or WxH (pixels), got '" << a->image_size
              << "'" << std::endl;
    return false;
  }
  if (!ParseBytes(a->shard_size, &o.shard_size)) {
    std::cerr << "mmpack build: --shard-size must be bytes with an optional unit "
                 "(e.g. 1GiB, 256MB), got '"
              << a->shard_size << "'" << std::endl;
    return false;
  }
  // CLI::IsMember has checked the names.
  o.input_format = mm::pack::ParseInputFormat(a->input_format).value();
  o.resize_mode = mm::format::ParseResizeMode(a->resize_mode).value();
  o.compression = mm::format::ParseCodec(a->compression).value();
  o.compression_given = a->compression_option->count() > 0 || a->level_option->count() > 0;
  if (a->compression_option->count() == 0 && a->level_option->count() > 0) {
    o.compression = mm::format::Codec::kZstd;  // a level is a zstd level
  }
  o.image_codec = mm::format::ParseImageCodec(a->codec).value();
  if (o.image_codec != mm::format::ImageCodec::kJpeg && a->quality_option->count() > 0) {
    std::cerr << "mmpack build: --quality is the JPEG quality of --codec jpeg; --codec " << a->codec
              << " stores no JPEG" << std::endl;
    return false;
  }
  if (o.image_codec == mm::format::ImageCodec::kJpeg) {
    if (a->compression_option->count() > 0 && o.compression != mm::format::Codec::kNone) {
      std::cerr << "mmpack build: --compression " << a->compression
                << " compresses raw pixels; --codec jpeg stores JPEG bytes without a filter"
                << std::endl;
      return false;
    }
    o.compression = mm::format::Codec::kNone;
  }
  if (!mm::format::IsFixedSize(o.resize_mode)) {
    if (a->image_size_option->count() > 0) {
      std::cerr << "mmpack build: --resize-mode " << a->resize_mode
                << " keeps each image's aspect ratio; give --max-size N, not --image-size"
                << std::endl;
      return false;
    }
    o.image_width = o.image_height = o.max_size;  // the set's nominal size (FORMAT.md)
  }
  o.text.normalize = mm::pack::ParseTextNormalization(a->normalize).value();
  o.filters.dedup = mm::pack::ParseDedupMode(a->dedup).value();
  if (mm::Status st = mm::reader::CheckMetadataFieldNames(o.keep_fields); !st.ok()) {
    std::cerr << "mmpack build: --keep-fields: " << st.message() << std::endl;
    return false;
  }
  o.fields.extra = o.keep_fields;  // RawSample::fields: the kept fields first
  if (!a->min_score.empty()) {
    mm::Status st = mm::pack::ParseMinScore(a->min_score, &o.filters);
    if (!st.ok()) {
      std::cerr << "mmpack build: " << st.message() << std::endl;
      return false;
    }
    const auto& extra = o.fields.extra;
    if (std::find(extra.begin(), extra.end(), o.filters.min_score_field) == extra.end()) {
      o.fields.extra.push_back(o.filters.min_score_field);
    }
  }
  return true;
}

}  // namespace mm::pack::cli
