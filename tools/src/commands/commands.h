// commands.h: entry points of the mmpack subcommands. main.cc parses the command line (CLI11)
// into these option structs and calls one of these; each returns a Status that main prints as
// one line ("mmpack build: NotFound: ...") with a non-zero exit.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "build/options.h"
#include "build/sample_source.h"
#include "commands/transfer_progress.h"
#include "curate/filters.h"
#include "ingest/ingest.h"
#include "mm/format.h"
#include "mm/reader.h"
#include "mm/status.h"
#include "shard/shard_writer.h"
#include "text/caption.h"
#include "text/normalize.h"
#include "text/tokenizer_sample.h"

namespace mm::pack {

/// `mmpack build RAW -o OUT` (build/build.h): the whole build, every mode; `source`: the
/// samples of `mmpack build - --input-format feed` (build/feed_source.h), else null.
Status RunBuild(const BuildOptions& options, SampleSource* source = nullptr);

/// How info, verify and upload report: text or one JSON object on `out` (--json; the keys are
/// README's "JSON output"), and progress lines on stderr while a remote set's bytes move.
struct ReportOptions {
  bool json = false;
  ProgressOptions progress;
};

/// `mmpack info OUT`: samples, shards, bytes per sample, image size, tokenizer, dropped.
/// OUT: a directory, or a remote set (s3://, gs://, hf://, http(s)://; only index.json and
/// report.json are fetched).
Status RunInfo(const std::string& dir, std::ostream& out,
               const mm::reader::RemoteOptions& remote = {}, const ReportOptions& report = {});

/// `mmpack verify OUT`: checksums, structure against the schema, every chunk decoded, counts
/// against the index. OK only when all is well; else the first bad shard and sample.
/// OUT as for info; a remote set's shards are downloaded one at a time through the cache of
/// `remote` (checked against index.json's XXH3-64 on arrival), then verified as local ones.
/// With report.json, a failure is also an object on `out` ("ok": false, "error").
Status RunVerify(const std::string& dir, std::ostream& out,
                 const mm::reader::RemoteOptions& remote = {}, const ReportOptions& report = {});

/// `mmpack upload OUT URL`: publishes the local set OUT at URL (s3://, gs:// or http(s)://,
/// through `remote`'s transport settings) as a sync (upload.cc): verifies OUT (as `mmpack
/// verify`), asks the server what it has of each file (HEAD) and sends only the files whose
/// size or XXH3-64 (kept with each object as x-amz-meta-mmpack-xxh3) differ, `transfers` at a
/// time, large ones in parts; then index.json last, only when it differs. The remote
/// index.json is never deleted. Prints one line per file sent (unless quiet or json) and
/// "upload: OK: N files to URL: S sent (SIZE), U unchanged", or one JSON object (json).
/// Errors: InvalidArgument (URL is not remote, OUT is), Unsupported (an hf:// URL), those of
/// verify ("not uploaded: OUT: ..."), IOError naming the URL of the file whose PUT failed after
/// the retries (URL then keeps its previous index.json, if it had one).
struct UploadOptions {
  std::string dir;                   // OUT: a local set
  std::string url;                   // where to publish it
  mm::reader::RemoteOptions remote;  // transport (retries, timeouts); the cache is not used
  int transfers = 4;                 // concurrent requests, 1..64 (rclone's --transfers)
  int64_t multipart_threshold = int64_t{64} << 20;  // bytes; s3:// and gs:// only
  int64_t part_size = int64_t{16} << 20;            // bytes, at least 5 MiB (S3's minimum)
  bool quiet = false;
  ReportOptions report;
};
Status RunUpload(const UploadOptions& options, std::ostream& out);

/// `mmpack env`: shell lines that set HDF5_PLUGIN_PATH to the plugin folder beside this mmpack
/// executable (a build tree's, the Python package's or an installed one's; env.cc).
/// Errors: NotFound when no libh5z_zstd.so is there (the message lists where it looked).
Result<std::string> EnvScript();

/// `mmpack bench OUT`: reader throughput.
struct BenchOptions {
  std::string dir;                   // a directory, s3:// or http(s)://
  mm::reader::RemoteOptions remote;  // cache and transport of a remote set
  mm::reader::ShuffleMode shuffle = mm::reader::ShuffleMode::kAuto;
  int shuffle_window = 0;  // kBlock: shards per window (0: chosen, see reader.h)
  int threads = 0;         // decode threads (0: one per CPU available, the Loader's default)
  int prefetch = 4;        // batches decoded ahead (LoaderOptions::prefetch_batches)
  int batch_size = 32;
  double seconds = 5.0;
  std::string crop = "none";               // the loader's crop: none | center | rrc
  int size = 0;                            // the loader's output side (0: as stored)
  std::string interpolation = "bilinear";  // the crop's resize filter: bilinear | lanczos
  // Open shards in this process, as mmtrain and mmpack.Loader do, instead of parsing each one's
  // HDF5 metadata in a forked child (the default: safe on damaged shards).
  bool trusted = false;
  bool json =
      false;  // one JSON object: samples_per_s, mb_per_s, cpu_ms_per_sample, peak_anon_rss_mb
  ProgressOptions progress;  // stderr lines while a remote set downloads
};
Status RunBench(const BenchOptions& options, std::ostream& out);

/// The loader's view that `mmpack bench` and `mmpack show` take from their options: crop
/// ("none" | "center" | "rrc", as CLI11 checked them), output side (0: as stored) and resize
/// filter ("lanczos" | "bilinear") into `lo`.
void SetLoaderView(const std::string& crop, int size, const std::string& interpolation,
                   mm::reader::LoaderOptions* lo);

/// `mmpack show OUT N -o sample.png`: sample N through the reader, as PNG, with key, captions
/// and token ids printed.
struct ShowOptions {
  std::string dir;                   // a directory, s3:// or http(s)://
  mm::reader::RemoteOptions remote;  // cache and transport of a remote set
  int64_t index = 0;
  std::string output_png;
  /// What the loader would hand out (mm::reader::LoaderOptions): crop "none" | "center" |
  /// "rrc", output size (0: stored), flip, seed and epoch of the random draws.
  std::string crop = "none";
  int size = 0;
  bool flip = false;
  std::string interpolation = "bilinear";  // bilinear | lanczos
  uint64_t seed = 0;
  int64_t epoch = 0;
};
Status RunShow(const ShowOptions& options, std::ostream& out);

/// `mmpack stats OUT [--json]`: caption length histograms (tokens, characters), captions per
/// image, <unk> rate, source size and aspect distributions (report.json "stats"), drops by
/// reason. Errors: NotFound (no index.json, or a report.json without stats), Corruption.
struct StatsOptions {
  std::string dir;
  bool json = false;
};
Status RunStats(const StatsOptions& options, std::ostream& out);

/// `mmpack preview OUT -o sheet.png`: a contact sheet of `count` samples (seeded, or the
/// first), key and first caption under each (preview.cc).
struct PreviewOptions {
  std::string dir;
  std::string output_png;
  int64_t count = 16;
  bool first = false;
  uint64_t seed = 0;
  int columns = 4;
};
Status RunPreview(const PreviewOptions& options, std::ostream& out);

/// `mmpack tokenize --tokenizer FILE`: the ids of captions read from `in`, one JSON string a
/// line, written to `out` as one JSON array a line ([bos] pieces [eos], as `mmpack build`
/// stores them, cut to `max_tokens` when above 0) (tokenize.cc). With `threads` above 1 the
/// lines are tokenized in parallel, the output in input order. Errors: InvalidArgument (a line
/// that is not a JSON string, naming its number; the tokenizer file), Internal.
struct TokenizeOptions {
  std::string tokenizer;
  int max_tokens = 0;  // 0: no cut
  int threads = 1;
  bool quiet = false;  // no rate line on stderr
};
Status RunTokenize(const TokenizeOptions& options, std::istream& in, std::ostream& out);

/// `mmpack retokenize SET --tokenizer FILE -o OUT`: SET's samples with the captions tokenized
/// again (retokenize.cc): OUT gets new token tables, SET's images as they are (each shard's
/// image dataset copied chunk by chunk, never decoded), the tokenizer file, index.json (last)
/// and report.json. SET is not changed. Errors: those of reading SET and writing OUT.
struct RetokenizeOptions {
  std::string set;
  std::string output;
  std::string tokenizer;
  int max_tokens = 77;
  TextOptions text;  // --lowercase, --normalize
  bool overwrite = false;
  bool quiet = false;
};
Status RunRetokenize(const RetokenizeOptions& options);

}  // namespace mm::pack
