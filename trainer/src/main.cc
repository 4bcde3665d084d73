// mmtrain: train a CoCa-style image-text model on mmpack shards (see trainer.h).
//
//   mmtrain --shards OUT --val-shards VAL --out RUN [--steps N] [--amp bf16] ...
//   mpirun -n 2 mmtrain ...            (or torchrun / srun; see distributed.h)
//   mmtrain plot RUN [RUN_B] -o curves.png
//
// Includes no LibTorch header.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "mm/internal/byte_size.h"
#include "plot.h"
#include "train.h"

namespace {

/// `mmtrain plot RUN [RUN_B] -o PNG`: one line and status 1 on any error.
int PlotMain(int argc, char** argv) {
  CLI::App app{"mmtrain plot: training curves of one run, or two overlaid, as a PNG",
               "mmtrain plot"};
  std::vector<std::string> runs;
  std::string png;
  app.add_option("runs", runs, "run directories (--out of mmtrain), one or two")
      ->required()
      ->expected(1, 2);
  app.add_option("-o,--output", png, "PNG file to write")->required();
  CLI11_PARSE(app, argc, argv);
  const std::string error = mm::train::PlotRuns(runs, png);
  if (error.empty()) return 0;
  std::fprintf(stderr, "mmtrain plot: error: %s\n", error.c_str());
  return 1;
}

// The command line's options, one function per group (in --help's order).
void AddDataOptions(CLI::App& app, mm::train::TrainConfig& c) {
  app.add_option("--shards", c.shards,
                 "training shard set: a directory with index.json, s3://BUCKET/PREFIX or "
                 "http(s)://URL (S3: AWS_* variables); on --resume: the checkpoint's");
  app.add_option("--val-shards", c.val_shards, "validation shard set (as --shards)");
  app.add_option("--cache-dir", c.cache_dir,
                 "cache of remote sets' shards (empty: $XDG_CACHE_HOME/mmpack)");
  app.add_option("--cache-limit", c.cache_limit,
                 "bytes the cache may hold, with an optional unit (e.g. 20GiB, 500MB; 0: no "
                 "limit; least recently used shards evicted)")
      ->transform(CLI::Validator(
          [](std::string& text) -> std::string {
            if (text == "0") return "";
            mm::Result<int64_t> bytes = mm::ParseByteSize(text);
            if (!bytes.ok()) return bytes.status().message();
            text = std::to_string(*bytes);
            return "";
          },
          "BYTES"));
  app.add_option("--shuffle", c.shuffle_mode,
                 "training order: global permutation, block shuffle (shards permuted, samples "
                 "within windows of shards) or auto (block when the cache limit cannot hold "
                 "the set)")
      ->check(CLI::IsMember({"auto", "global", "block"}));
  app.add_option("--shuffle-window", c.shuffle_window,
                 "block shuffle: shards per window (0: the largest the cache limit allows)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--out", c.out, "run directory: metrics.jsonl, checkpoints, summary.json");
}

void AddModelOptions(CLI::App& app, mm::train::TrainConfig& c, std::string& loss_weights) {
  app.add_option("--preset", c.preset,
                 "default model size: cpu (dim 128, 2 layers, patch 32) "
                 "or gpu (dim 512, 6 layers, patch 16)");
  app.add_option("--dim", c.dim, "model width (overrides the preset)");
  app.add_option("--layers", c.layers, "blocks per tower (image, text, fusion)");
  app.add_option("--heads", c.heads, "attention heads");
  app.add_option("--patch", c.patch, "ViT patch side in pixels");
  app.add_option("--loss-weights", loss_weights, "\"contrastive,caption\" weights");
  app.add_flag("--local-loss", c.local_loss,
               "contrastive loss of this rank's rows against all gathered columns (B x N logits "
               "instead of N x N; the same gradient)");
  app.add_option_function<std::string>(
         "--amp", [&c](const std::string& s) { c.amp = mm::train::ParseAmp(s); },
         "off | bf16 | fp16 (fp16 needs CUDA)")
      ->check(CLI::IsMember({"off", "bf16", "fp16"}))
      ->default_str(mm::train::AmpName(c.amp));
  app.add_option("--device", c.device, "cpu | cuda | cuda:N");
}

void AddOptimisationOptions(CLI::App& app, mm::train::TrainConfig& c) {
  app.add_option("--batch-size", c.batch_size, "items per micro-batch per rank");
  app.add_option("--accum-steps", c.accum_steps, "micro-batches per optimizer step");
  app.add_option("--steps", c.steps, "optimizer steps (0: --epochs)");
  app.add_option("--epochs", c.epochs, "epochs when --steps is 0");
  app.add_option("--lr", c.lr, "peak learning rate");
  app.add_option("--weight-decay", c.weight_decay, "AdamW weight decay");
  app.add_option("--warmup", c.warmup, "linear warmup steps (-1: 5% of steps)");
  app.add_option("--clip-grad", c.clip_grad, "max gradient L2 norm (0: off)");
  app.add_option("--seed", c.seed, "seed of initialisation and data order");
}

void AddScheduleOptions(CLI::App& app, mm::train::TrainConfig& c) {
  app.add_option("--log-every", c.log_every, "steps between log lines");
  app.add_option("--eval-every", c.eval_every,
                 "steps between evaluations (0: only at the end "
                 "when --val-shards is given)");
  app.add_option("--save-every", c.save_every, "steps between checkpoints (and one at the end)");
  app.add_option("--patience", c.patience,
                 "stop after this many evaluations without "
                 "val-loss improvement (0: never)");
  app.add_option("--resume", c.resume,
                 "checkpoint to continue from; flags not given come from its config");
  app.add_flag("--resume-override", c.resume_override,
               "resume although a given flag changes the optimisation or --shards is another set");
  app.add_option("--stop-after", c.stop_after,
                 "stop after this step, keeping the schedule of "
                 "--steps (to test --resume)");
}

// The process's own (dumps, timeouts, threads) and the input pipeline's.
void AddProcessOptions(CLI::App& app, mm::train::TrainConfig& c, bool& no_shuffle) {
  app.add_option("--dump-params", c.dump_params,
                 "write the final parameters to this file "
                 "(.rankN appended under DDP)");
  app.add_option("--dump-grads", c.dump_grads, "write the first step's gradients to this file");
  app.add_option("--dist-timeout", c.dist_timeout_s,
                 "seconds before a collective or the "
                 "rendezvous fails");
  app.add_option("--threads", c.threads, "LibTorch intra-op threads (0: default)");
  app.add_option("--loader-threads", c.loader_threads,
                 "reader decode threads, sharing each batch (0: one per CPU available, shared "
                 "among the node's ranks)");
  app.add_option_function<std::string>(
         "--augment", [&c](const std::string& s) { c.augment = mm::train::ParseAugment(s); },
         "rrc: train on random-resized crops (torchvision's), evaluate on centre crops; "
         "none: the stored images")
      ->check(CLI::IsMember({"rrc", "none"}))
      ->default_str(mm::train::AugmentName(c.augment));
  app.add_option("--prefetch", c.prefetch,
                 "reader batches being decoded or ready, at most (memory; 2 keeps every "
                 "thread busy)");
  app.add_option("--eval-max", c.eval_max, "evaluate on at most this many val samples");
  app.add_flag("--no-shuffle", no_shuffle, "read the training set in file order");
  app.add_flag("--quiet", c.quiet, "no per-step lines");
  app.add_flag("--reuse-batches", c.reuse_batches,
               "benchmark baseline: train on the first step's batches every step (no reading)");
}

// "contrastive,caption" into c.w_contrastive and c.w_caption. Throws std::invalid_argument.
void ParseLossWeights(const std::string& loss_weights, mm::train::TrainConfig& c) {
  char comma = 0;
  std::istringstream lw(loss_weights);
  if (!(lw >> c.w_contrastive >> comma >> c.w_caption) || comma != ',' || c.w_contrastive < 0 ||
      c.w_caption < 0) {
    throw std::invalid_argument(
        "--loss-weights must be two non-negative numbers "
        "\"contrastive,caption\", not '" +
        loss_weights + "'");
  }
}

// Train(c) with every error as one line on stderr and status 1.
int RunTraining(mm::train::TrainConfig& c, const std::string& loss_weights) {
  int rank = 0;
  try {
    rank = mm::train::RankFromEnvironment();
    if (c.shards.empty() && c.resume.empty()) {
      throw std::invalid_argument("--shards is required (or --resume, which knows it)");
    }
    ParseLossWeights(loss_weights, c);
    mm::train::Train(c);
  } catch (const std::exception& e) {
    // One line; the first line of a c10::Error (its backtrace follows on later lines).
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    std::fprintf(stderr, "mmtrain (rank %d): error: %s\n", rank, msg.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    // Do not run destructors: a process group whose peer died may block in them.
    std::_Exit(1);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "plot") return PlotMain(argc - 1, argv + 1);
  mm::train::TrainConfig c;
  CLI::App app{"mmtrain: train a CoCa-style model (contrastive + captioning) on mmpack shards"};
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.footer("Curves: mmtrain plot RUN [RUN_B] -o curves.png (mmtrain plot --help)");
  std::string loss_weights = "1,1";
  bool no_shuffle = false;
  AddDataOptions(app, c);
  AddModelOptions(app, c, loss_weights);
  AddOptimisationOptions(app, c);
  AddScheduleOptions(app, c);
  AddProcessOptions(app, c, no_shuffle);
  CLI11_PARSE(app, argc, argv);
  c.shuffle = !no_shuffle;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() > 0 && !opt->get_lnames().empty())
      c.given.push_back("--" + opt->get_lnames()[0]);
  }
  return RunTraining(c, loss_weights);
}
