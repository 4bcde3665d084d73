// main.cc: the `mmpack` command line (CLI11): compile image-text pairs into HDF5 shards, and
// inspect, verify, read them.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "build/feed_source.h"
#include "commands/commands.h"
#include "curate/filters.h"
#include "mm/format.h"
#include "mm/internal/byte_size.h"
#include "mm/internal/set_rules.h"
#include "mm/reader.h"
#include "mm/version.h"
#include "set/output_dir.h"
#include "shard/h5_util.h"
#include "text/normalize.h"

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

// "1GiB", "256MB", "500M", "4096" -> bytes (mm/internal/byte_size.h).
bool ParseBytes(const std::string& text, int64_t* bytes) {
  mm::Result<int64_t> parsed = mm::ParseByteSize(text);
  if (!parsed.ok()) return false;
  *bytes = *parsed;
  return true;
}

int Report(const char* command, const mm::Status& status) {
  if (status.ok()) return 0;
  std::cerr << "mmpack " << command << ": " << status.ToString() << std::endl;
  return 1;
}

// `mmpack build`'s options as CLI11 fills them: BuildOptions, plus the values that are parsed
// after CLI11 (sizes, and the typed options as text, so that --help lists their names).
struct BuildArgs {
  mm::pack::BuildOptions options;
  std::string image_size = "224", shard_size = "1GiB";
  std::string input_format{ToString(options.input_format)};
  std::string resize_mode{ToString(options.resize_mode)};
  std::string compression{ToString(options.compression)};
  std::string codec{ToString(options.image_codec)};
  CLI::Option* compression_option = nullptr;  // given on the command line?
  CLI::Option* level_option = nullptr;
  CLI::Option* image_size_option = nullptr;
  CLI::Option* quality_option = nullptr;
  std::string normalize{ToString(options.text.normalize)};
  std::string dedup{ToString(options.filters.dedup)};
  std::string min_score;
};

// --lowercase ... --dedup: text normalisation, field mapping and filters (issue 14).
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

// The values CLI11 left as text, into `a->options`: false (after one line on stderr) when one
// cannot be parsed.
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

// The options of a command that reads a set that may be remote (s3://, http(s)://), as CLI11
// fills them; FinishRemote turns them into RemoteOptions.
struct RemoteArgs {
  std::string cache_dir;
  std::string cache_limit = "0";
};

constexpr const char* kSetHelp =
    "Shard set: a directory, s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, "
    "hf://datasets/ORG/NAME[@REV]/PATH or http(s)://URL";

// --progress-every: lines on stderr while a remote set's bytes move (transfer_progress.h).
void AddProgress(CLI::App* cmd, mm::pack::ProgressOptions* p) {
  cmd->add_option("--progress-every", p->every_s,
                  "Seconds between progress lines when stderr is not a terminal (0: none; a "
                  "terminal gets one line redrawn)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

// A byte size option checked as it is parsed ("64MiB"): CLI11's usage error otherwise.
CLI::Option* AddBytes(CLI::App* cmd, const std::string& name, int64_t* bytes,
                      const std::string& help, int64_t minimum) {
  return cmd
      ->add_option_function<std::string>(
          name,
          [bytes, name, minimum](const std::string& text) {
            int64_t parsed = 0;
            if (!ParseBytes(text, &parsed) || parsed < minimum) {
              throw CLI::ValidationError(
                  name, "'" + text + "' is not a byte size of at least " + std::to_string(minimum));
            }
            *bytes = parsed;
          },
          help)
      ->default_str(std::to_string(*bytes));
}

void AddRemote(CLI::App* cmd, RemoteArgs* r) {
  cmd->add_option("--cache-dir", r->cache_dir,
                  "Cache of a remote set's shards (default $XDG_CACHE_HOME/mmpack)");
  cmd->add_option("--cache-limit", r->cache_limit,
                  "Bytes the cache may hold, e.g. 20GiB (0: no limit; LRU eviction)")
      ->capture_default_str();
}

bool FinishRemote(const RemoteArgs& r, const char* command, mm::reader::RemoteOptions* o) {
  o->cache_dir = r.cache_dir;
  if (r.cache_limit == "0") {
    o->cache_limit = 0;  // no limit (ParseBytes takes sizes, which are positive)
  } else if (!ParseBytes(r.cache_limit, &o->cache_limit)) {
    std::cerr << "mmpack " << command
              << ": --cache-limit must be bytes with an optional unit (e.g. 20GiB), got '"
              << r.cache_limit << "'" << std::endl;
    return false;
  }
  return true;
}

CLI::App* AddBench(CLI::App& app, mm::pack::BenchOptions* bench, RemoteArgs* remote,
                   std::string* shuffle) {
  auto* be = app.add_subcommand("bench", "Measure reader throughput on a shard set");
  be->add_option("dir", bench->dir, kSetHelp)->required();
  AddRemote(be, remote);
  be->add_option("--shuffle", *shuffle,
                 "Order: global permutation, block shuffle (shards permuted, samples within a "
                 "window of shards), or auto (block when the cache limit cannot hold the set)")
      ->check(CLI::IsMember({"auto", "global", "block"}))
      ->capture_default_str();
  be->add_option("--shuffle-window", bench->shuffle_window,
                 "Block shuffle: shards per window (0: the largest the cache limit allows)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  be->add_option("--threads", bench->threads, "Decode threads (0: one per CPU available)")
      ->check(CLI::Range(0, mm::reader::kMaxLoaderThreads))
      ->capture_default_str();
  be->add_option("--prefetch", bench->prefetch, "Batches decoded ahead, at most")
      ->check(CLI::Range(1, mm::reader::kMaxPrefetchBatches))
      ->capture_default_str();
  be->add_option("--batch-size", bench->batch_size, "Batch size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  be->add_option("--seconds", bench->seconds, "How long to read")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  be->add_option("--crop", bench->crop, "The loader's crop: none | center | rrc")
      ->check(CLI::IsMember({"none", "center", "rrc"}));
  be->add_option("--size", bench->size, "The loader's output side in pixels (0: as stored)")
      ->check(CLI::Range(0, mm::reader::kMaxOutputSide));
  be->add_flag("--trusted", bench->trusted,
               "Open shards in this process, as mmtrain and mmpack.Loader do (default: each "
               "shard's HDF5 metadata in a forked child, safe on damaged shards)");
  be->add_option("--interpolation", bench->interpolation,
                 "The crop's resize filter: lanczos | bilinear (both antialiased)")
      ->check(CLI::IsMember({"lanczos", "bilinear"}))
      ->capture_default_str();
  be->add_flag("--json", bench->json, "Print one JSON object");
  AddProgress(be, &bench->progress);
  return be;
}

CLI::App* AddShow(CLI::App& app, mm::pack::ShowOptions* show, RemoteArgs* remote) {
  auto* sh = app.add_subcommand("show", "Write sample N as PNG and print its captions and tokens");
  sh->add_option("dir", show->dir, kSetHelp)->required();
  AddRemote(sh, remote);
  sh->add_option("index", show->index, "Global sample index")
      ->required()
      ->check(CLI::NonNegativeNumber);
  sh->add_option("-o,--output", show->output_png, "PNG file to write")->required();
  sh->add_option("--crop", show->crop, "the loader's crop: none | center | rrc")
      ->check(CLI::IsMember({"none", "center", "rrc"}));
  sh->add_option("--size", show->size, "the loader's output side in pixels (0: as stored)")
      ->check(CLI::Range(0, mm::reader::kMaxOutputSide));
  sh->add_flag("--flip", show->flip, "the loader's random horizontal flip");
  sh->add_option("--interpolation", show->interpolation,
                 "the crop's resize filter: lanczos | bilinear")
      ->check(CLI::IsMember({"lanczos", "bilinear"}))
      ->capture_default_str();
  sh->add_option("--seed", show->seed, "seed of the loader's random draws");
  sh->add_option("--epoch", show->epoch, "epoch of the loader's random draws")
      ->check(CLI::NonNegativeNumber);
  return sh;
}

CLI::App* AddStats(CLI::App& app, mm::pack::StatsOptions* stats) {
  auto* st = app.add_subcommand("stats",
                                "Caption lengths, captions per image, unk rate, source "
                                "sizes and aspects, drops by reason");
  st->add_option("dir", stats->dir, "Shard set directory")->required();
  st->add_flag("--json", stats->json, "Print one JSON object");
  return st;
}

CLI::App* AddPreview(CLI::App& app, mm::pack::PreviewOptions* p) {
  auto* pv = app.add_subcommand("preview", "Write a contact sheet of samples with key and caption");
  pv->add_option("dir", p->dir, "Shard set directory")->required();
  pv->add_option("-o,--output", p->output_png, "PNG file to write")->required();
  pv->add_option("-n,--count", p->count, "Samples on the sheet")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  pv->add_flag("--first", p->first, "The first samples instead of a seeded draw");
  pv->add_option("--seed", p->seed, "Seed of the draw")->capture_default_str();
  pv->add_option("--columns", p->columns, "Images per row")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  return pv;
}

CLI::App* AddTokenize(CLI::App& app, mm::pack::TokenizeOptions* t) {
  auto* tk = app.add_subcommand("tokenize",
                                "Token ids of captions: one JSON string a line on stdin, one "
                                "JSON array a line on stdout");
  tk->add_option("--tokenizer", t->tokenizer, "Tokenizer file, as mmpack build takes it")
      ->required()
      ->check(CLI::ExistingFile);
  tk->add_option("--max-tokens", t->max_tokens, "Cut each caption to this many ids (0: none)")
      ->check(CLI::NonNegativeNumber);
  tk->add_option("-j,--threads", t->threads, "Threads")->check(CLI::Range(1, 256));
  tk->add_flag("-q,--quiet", t->quiet, "No rate line on stderr");
  return tk;
}

CLI::App* AddRetokenize(CLI::App& app, mm::pack::RetokenizeOptions* r, std::string* normalize) {
  auto* rt = app.add_subcommand(
      "retokenize", "Copy a shard set with its captions tokenized again; images untouched");
  rt->add_option("set", r->set, "Shard set directory")->required();
  rt->add_option("-o,--output", r->output, "New shard set directory")->required();
  rt->add_option("--tokenizer", r->tokenizer, "Tokenizer file, as mmpack build takes it")
      ->required()
      ->check(CLI::ExistingFile);
  rt->add_option("--max-tokens", r->max_tokens, "Tokens per caption, bos/eos included")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  rt->add_flag("--lowercase", r->text.lowercase, "Lowercase captions before tokenizing");
  rt->add_option("--normalize", *normalize, "Unicode normalisation before tokenizing")
      ->check(CLI::IsMember({std::string("none"), std::string("nfkc")}))
      ->capture_default_str();
  rt->add_flag("--overwrite", r->overwrite, "Replace OUT if it exists");
  rt->add_flag("-q,--quiet", r->quiet, "Print only errors and the summary");
  return rt;
}

}  // namespace

int main(int argc, char** argv) {
  mm::h5::SkipLibraryCloseAtExit();  // before any HDF5 call (h5_util.h)
  try {
    CLI::App app{
        "mmpack: compile image-text pairs into zstd-compressed HDF5 shards, and read them"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "mmpack " + std::string(mm::kVersion) + " (shard format v" +
                                          std::to_string(mm::format::kFormatVersion) + ")");
    BuildArgs build;
    auto* b = AddBuild(app, &build);
    std::string dir;
    RemoteArgs remote;  // of the one subcommand given
    mm::pack::ReportOptions report;
    auto* info = app.add_subcommand("info", "Summarise a shard set");
    info->add_option("dir", dir, kSetHelp)->required();
    AddRemote(info, &remote);
    info->add_flag("--json", report.json, "Print one JSON object (keys: README)");
    AddProgress(info, &report.progress);
    auto* verify =
        app.add_subcommand("verify", "Check a shard set end to end; exit 0 only if sound");
    verify->add_option("dir", dir, kSetHelp)->required();
    AddRemote(verify, &remote);
    verify->add_flag("--json", report.json,
                     "Print one JSON object, also on failure (keys: README)");
    AddProgress(verify, &report.progress);
    auto* env =
        app.add_subcommand("env", "Print shell lines for h5dump/h5py: eval \"$(mmpack env)\"");
    mm::pack::BenchOptions bench;
    std::string shuffle = "auto";
    auto* be = AddBench(app, &bench, &remote, &shuffle);
    mm::pack::ShowOptions show;
    auto* sh = AddShow(app, &show, &remote);
    mm::pack::UploadOptions upload;
    auto* up = app.add_subcommand(
        "upload",
        "Sync a local set to s3://, gs:// or http(s)://: send only what differs, index.json last");
    up->add_option("dir", upload.dir, "Local shard set (verified first)")->required();
    up->add_option("url", upload.url,
                   "Destination: s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or http(s)://URL")
        ->required();
    up->add_option("--transfers", upload.transfers, "Files uploaded at a time (index.json last)")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    AddBytes(up, "--multipart-threshold", &upload.multipart_threshold,
             "s3:// and gs://: files of at least this size go up in parts, each retried alone", 1);
    AddBytes(up, "--part-size", &upload.part_size,
             "Bytes of a part of a multipart upload (S3's minimum: 5MiB)", int64_t{5} << 20);
    up->add_flag("-q,--quiet", upload.quiet, "Print only errors and the summary");
    up->add_flag("--json", upload.report.json, "Print one JSON object (keys: README)");
    AddProgress(up, &upload.report.progress);
    mm::pack::StatsOptions stats;
    auto* st = AddStats(app, &stats);
    mm::pack::PreviewOptions preview;
    auto* pv = AddPreview(app, &preview);
    mm::pack::TokenizeOptions tokenize;
    auto* tk = AddTokenize(app, &tokenize);
    mm::pack::RetokenizeOptions retokenize;
    std::string retokenize_normalize = "none";
    auto* rt = AddRetokenize(app, &retokenize, &retokenize_normalize);
    CLI11_PARSE(app, argc, argv);

    if (*b) {
      if (!FinishBuild(&build)) return 2;
      if (build.options.input_format != mm::pack::InputFormat::kFeed) {
        return Report("build", mm::pack::RunBuild(build.options));
      }
      // mmpack.Writer: samples on stdin, "ready" on stdout (build/feed_source.h).
      mm::pack::FeedSource feed(STDIN_FILENO, STDOUT_FILENO,
                                mm::pack::NormalOutput(build.options.output));
      return Report("build", mm::pack::RunBuild(build.options, &feed));
    }
    mm::reader::RemoteOptions remote_options;
    if (!FinishRemote(remote, app.get_subcommands().front()->get_name().c_str(), &remote_options)) {
      return 2;
    }
    report.progress.enabled = report.progress.every_s > 0;
    if (*info) return Report("info", mm::pack::RunInfo(dir, std::cout, remote_options, report));
    if (*verify) {
      return Report("verify", mm::pack::RunVerify(dir, std::cout, remote_options, report));
    }
    if (*env) {
      mm::Result<std::string> script = mm::pack::EnvScript();
      if (script.ok()) std::cout << *script;
      return Report("env", script.status());
    }
    if (*be) {
      bench.remote = remote_options;
      bench.progress.enabled = bench.progress.every_s > 0;
      bench.shuffle = mm::reader::ParseShuffleMode(shuffle).value();  // CLI::IsMember checked
      return Report("bench", mm::pack::RunBench(bench, std::cout));
    }
    if (*up) {
      upload.remote = remote_options;
      upload.report.progress.enabled = upload.report.progress.every_s > 0;
      return Report("upload", mm::pack::RunUpload(upload, std::cout));
    }
    if (*sh) {
      show.remote = remote_options;
      return Report("show", mm::pack::RunShow(show, std::cout));
    }
    if (*st) return Report("stats", mm::pack::RunStats(stats, std::cout));
    if (*pv) return Report("preview", mm::pack::RunPreview(preview, std::cout));
    if (*tk) return Report("tokenize", mm::pack::RunTokenize(tokenize, std::cin, std::cout));
    if (*rt) {
      retokenize.text.normalize = *mm::pack::ParseTextNormalization(retokenize_normalize);
      return Report("retokenize", mm::pack::RunRetokenize(retokenize));
    }
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "mmpack: " << e.what() << std::endl;
    return 1;
  }
}
