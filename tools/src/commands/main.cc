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
#include "commands/build_cli.h"
#include "commands/commands.h"
#include "commands/mixture_report.h"
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

using mm::pack::cli::AddBuild;
using mm::pack::cli::BuildArgs;
using mm::pack::cli::FinishBuild;
using mm::pack::cli::ParseBytes;

int Report(const char* command, const mm::Status& status) {
  if (status.ok()) return 0;
  std::cerr << "mmpack " << command << ": " << status.ToString() << std::endl;
  return 1;
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
constexpr const char* kSetMixHelp =
    "Shard set: a directory, s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, "
    "hf://datasets/ORG/NAME[@REV]/PATH or http(s)://URL; or a mixture of sets, A:0.7,B:0.3 or "
    "a JSON file (each set reported, then the mixture)";

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
  st->add_option("dir", stats->dir,
                 "Shard set directory, or a mixture of them (A:0.7,B:0.3 or a JSON file)")
      ->required();
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

// Every subcommand's options, and the subcommands (exactly one is given). Registered once
// (CLI11 keeps pointers into it): not copied or moved.
struct Commands {
  BuildArgs build;
  std::string dir;                 // info, verify
  RemoteArgs remote;               // of the one subcommand given
  mm::pack::ReportOptions report;  // info, verify
  mm::pack::BenchOptions bench;
  std::string shuffle = "auto";  // bench
  mm::pack::ShowOptions show;
  mm::pack::UploadOptions upload;
  mm::pack::StatsOptions stats;
  mm::pack::PreviewOptions preview;
  mm::pack::TokenizeOptions tokenize;
  mm::pack::RetokenizeOptions retokenize;
  std::string retokenize_normalize = "none";
  CLI::App *build_cmd = nullptr, *info = nullptr, *verify = nullptr, *env = nullptr,
           *bench_cmd = nullptr, *show_cmd = nullptr, *upload_cmd = nullptr, *stats_cmd = nullptr,
           *preview_cmd = nullptr, *tokenize_cmd = nullptr, *retokenize_cmd = nullptr;
};

CLI::App* AddInfo(CLI::App& app, Commands* c) {
  auto* info = app.add_subcommand("info", "Summarise a shard set");
  info->add_option("dir", c->dir, kSetMixHelp)->required();
  AddRemote(info, &c->remote);
  info->add_flag("--json", c->report.json, "Print one JSON object (keys: README)");
  AddProgress(info, &c->report.progress);
  return info;
}

CLI::App* AddVerify(CLI::App& app, Commands* c) {
  auto* verify = app.add_subcommand("verify", "Check a shard set end to end; exit 0 only if sound");
  verify->add_option("dir", c->dir, kSetMixHelp)->required();
  AddRemote(verify, &c->remote);
  verify->add_flag("--json", c->report.json,
                   "Print one JSON object, also on failure (keys: README)");
  AddProgress(verify, &c->report.progress);
  return verify;
}

CLI::App* AddUpload(CLI::App& app, mm::pack::UploadOptions* upload) {
  auto* up = app.add_subcommand(
      "upload",
      "Sync a local set to s3://, gs:// or http(s)://: send only what differs, index.json last");
  up->add_option("dir", upload->dir, "Local shard set (verified first)")->required();
  up->add_option("url", upload->url,
                 "Destination: s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or http(s)://URL")
      ->required();
  up->add_option("--transfers", upload->transfers, "Files uploaded at a time (index.json last)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  AddBytes(up, "--multipart-threshold", &upload->multipart_threshold,
           "s3:// and gs://: files of at least this size go up in parts, each retried alone", 1);
  AddBytes(up, "--part-size", &upload->part_size,
           "Bytes of a part of a multipart upload (S3's minimum: 5MiB)", int64_t{5} << 20);
  up->add_flag("-q,--quiet", upload->quiet, "Print only errors and the summary");
  up->add_flag("--json", upload->report.json, "Print one JSON object (keys: README)");
  AddProgress(up, &upload->report.progress);
  return up;
}

// Every subcommand, in --help's order.
void AddCommands(CLI::App& app, Commands* c) {
  c->build_cmd = AddBuild(app, &c->build);
  c->info = AddInfo(app, c);
  c->verify = AddVerify(app, c);
  c->env = app.add_subcommand("env", "Print shell lines for h5dump/h5py: eval \"$(mmpack env)\"");
  c->bench_cmd = AddBench(app, &c->bench, &c->remote, &c->shuffle);
  c->show_cmd = AddShow(app, &c->show, &c->remote);
  c->upload_cmd = AddUpload(app, &c->upload);
  c->stats_cmd = AddStats(app, &c->stats);
  c->preview_cmd = AddPreview(app, &c->preview);
  c->tokenize_cmd = AddTokenize(app, &c->tokenize);
  c->retokenize_cmd = AddRetokenize(app, &c->retokenize, &c->retokenize_normalize);
}

// Runs the subcommand given (other than build, which reads no remote set); its exit status.
int RunCommand(Commands& c, const mm::reader::RemoteOptions& remote_options) {
  c.report.progress.enabled = c.report.progress.every_s > 0;
  // A mixture ("A:0.7,B:0.3", a JSON file): each set, then the mixture (mixture_report.h).
  const auto set_report = [&](auto run) {
    return [&, run](const std::string& where, std::ostream& out, bool json) {
      mm::pack::ReportOptions one = c.report;
      one.json = json;
      return run(where, out, remote_options, one);
    };
  };
  if (*c.info) {
    auto mixed = mm::pack::RunOnMixture(c.dir, std::cout, c.report.json, remote_options,
                                        set_report(mm::pack::RunInfo));
    return Report("info",
                  mixed ? *mixed : mm::pack::RunInfo(c.dir, std::cout, remote_options, c.report));
  }
  if (*c.verify) {
    auto mixed = mm::pack::RunOnMixture(c.dir, std::cout, c.report.json, remote_options,
                                        set_report(mm::pack::RunVerify));
    if (mixed) return Report("verify", *mixed);
    return Report("verify", mm::pack::RunVerify(c.dir, std::cout, remote_options, c.report));
  }
  if (*c.env) {
    mm::Result<std::string> script = mm::pack::EnvScript();
    if (script.ok()) std::cout << *script;
    return Report("env", script.status());
  }
  if (*c.bench_cmd) {
    c.bench.remote = remote_options;
    c.bench.progress.enabled = c.bench.progress.every_s > 0;
    c.bench.shuffle = mm::reader::ParseShuffleMode(c.shuffle).value();  // CLI::IsMember checked
    return Report("bench", mm::pack::RunBench(c.bench, std::cout));
  }
  if (*c.upload_cmd) {
    c.upload.remote = remote_options;
    c.upload.report.progress.enabled = c.upload.report.progress.every_s > 0;
    return Report("upload", mm::pack::RunUpload(c.upload, std::cout));
  }
  if (*c.show_cmd) {
    c.show.remote = remote_options;
    return Report("show", mm::pack::RunShow(c.show, std::cout));
  }
  if (*c.stats_cmd) {
    auto mixed =
        mm::pack::RunOnMixture(c.stats.dir, std::cout, c.stats.json, remote_options,
                               [&](const std::string& where, std::ostream& out, bool json) {
                                 mm::pack::StatsOptions one = c.stats;
                                 one.dir = where;
                                 one.json = json;
                                 return mm::pack::RunStats(one, out);
                               });
    return Report("stats", mixed ? *mixed : mm::pack::RunStats(c.stats, std::cout));
  }
  if (*c.preview_cmd) return Report("preview", mm::pack::RunPreview(c.preview, std::cout));
  if (*c.tokenize_cmd) {
    return Report("tokenize", mm::pack::RunTokenize(c.tokenize, std::cin, std::cout));
  }
  if (*c.retokenize_cmd) {
    c.retokenize.text.normalize = *mm::pack::ParseTextNormalization(c.retokenize_normalize);
    return Report("retokenize", mm::pack::RunRetokenize(c.retokenize));
  }
  return 2;
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
    Commands c;
    AddCommands(app, &c);
    CLI11_PARSE(app, argc, argv);
    if (*c.build_cmd) {
      if (!FinishBuild(&c.build)) return 2;
      if (c.build.options.input_format != mm::pack::InputFormat::kFeed) {
        return Report("build", mm::pack::RunBuild(c.build.options));
      }
      // mmpack.Writer: samples on stdin, "ready" on stdout (build/feed_source.h).
      mm::pack::FeedSource feed(STDIN_FILENO, STDOUT_FILENO,
                                mm::pack::NormalOutput(c.build.options.output));
      return Report("build", mm::pack::RunBuild(c.build.options, &feed));
    }
    mm::reader::RemoteOptions remote_options;
    if (!FinishRemote(c.remote, app.get_subcommands().front()->get_name().c_str(),
                      &remote_options)) {
      return 2;
    }
    return RunCommand(c, remote_options);
  } catch (const std::exception& e) {
    std::cerr << "mmpack: " << e.what() << std::endl;
    return 1;
  }
}
