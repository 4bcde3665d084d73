// config.h: mmtrain's run settings, as the command line gives them (see main.cc) and as a
// checkpoint stores them (ToJson), and the model's shape they lead to. No LibTorch header:
// main.cc parses into it cheaply.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mm::reader {
struct SetInfo;
}  // namespace mm::reader

namespace mm::train {

/// --amp: mixed precision of the forward pass (amp.h).
enum class AmpMode { kOff, kBf16, kFp16 };
/// --augment: kRandomResizedCrop trains on torchvision's random-resized crops and evaluates on
/// centre crops (the reader's LoaderOptions::crop); kNone uses the stored images as they are.
enum class Augment { kNone, kRandomResizedCrop };

/// "off" | "bf16" | "fp16" (as the command line and a checkpoint's config spell them). Throws
/// std::invalid_argument naming the value.
AmpMode ParseAmp(const std::string& s);
const char* AmpName(AmpMode m);
/// "none" | "rrc". Throws std::invalid_argument naming the value.
Augment ParseAugment(const std::string& s);
const char* AugmentName(Augment a);

struct ModelConfig {
  int64_t dim = 128;         // D: width of every transformer
  int64_t layers = 2;        // blocks in each of image encoder, text encoder, fusion decoder
  int64_t heads = 4;         // attention heads (dim % heads == 0)
  int64_t patch = 32;        // P: patch side in pixels
  int64_t image_size = 224;  // H == W of the shards, pixels
  int64_t vocab_size = 0;    // V: from the shard set's index
  int64_t max_tokens = 77;   // longest caption, bos/eos included: position-embedding rows
  int64_t embed_dim = 128;   // E: joint contrastive embedding
  int64_t mlp_ratio = 4;
  std::string ToJson() const;
};

struct TrainConfig {
  std::string shards;          // --shards: training shard set (directory, s3://, http(s)://)
  std::string val_shards;      // --val-shards: evaluation set ("" = no evaluation)
  std::string out;             // --out RUN: metrics.jsonl, checkpoints, summary.json
  std::string preset = "cpu";  // cpu | gpu: default model size
  int64_t dim = 0, layers = 0, heads = 0, patch = 0;  // 0: the preset's value
  double w_contrastive = 1.0, w_caption = 1.0;        // --loss-weights "c,k"
  bool local_loss = false;  // InfoNCE of this rank's rows against all columns (open_clip)
  AmpMode amp = AmpMode::kOff;
  std::string device = "cpu";  // cpu | cuda | cuda:N (LOCAL_RANK picks N when only "cuda")
  int batch_size = 32;         // per rank, per micro-batch
  int accum_steps = 1;         // K
  int64_t steps = 0;           // optimizer steps (0: from epochs)
  int64_t epochs = 1;          // used when steps == 0
  double lr = 1e-3;
  double weight_decay = 0.05;
  int64_t warmup = -1;     // steps of linear warmup (-1: 5% of steps)
  double clip_grad = 1.0;  // max global gradient L2 norm (0: off)
  uint64_t seed = 0;
  int64_t log_every = 10, eval_every = 0, save_every = 0;
  int64_t patience = 0;          // evaluations without val-loss improvement before stopping
  std::string resume;            // checkpoint file to continue from
  bool resume_override = false;  // resume although a flag or the training set differs
  int64_t stop_after = 0;        // leave after this step as if killed (schedule still --steps)
  std::string dump_params;       // write final parameters (torch::save of a tensor list)
  std::string dump_grads;        // write the first step's (reduced) gradients, then go on
  double dist_timeout_s = 60;    // c10d rendezvous and collective timeout, seconds
  int threads = 0;               // LibTorch intra-op threads (0: LibTorch's default)
  int loader_threads = 0;        // reader decode threads (0: reader::DefaultLoaderThreads())
  int prefetch = 4;              // reader batches being decoded or ready, at most
  bool shuffle = true;
  std::string shuffle_mode = "auto";  // --shuffle: auto | global | block (reader.h ShuffleMode)
  int shuffle_window = 0;             // --shuffle-window: block shuffle's shards per window
  std::string cache_dir;              // --cache-dir: remote sets' cache ("": XDG default)
  int64_t cache_limit = 0;            // --cache-limit: bytes the cache may hold (0: no limit)
  int64_t eval_max = 0;               // evaluate on at most this many val samples (0: all)
  Augment augment = Augment::kNone;
  bool quiet = false;  // no per-step log lines on stdout
  // Benchmark baseline: the first step's batches every step (model compute without the reader).
  bool reuse_batches = false;

  // The flags given on the command line ("--lr", ...): on --resume, every other setting of
  // ToJson comes from the checkpoint.
  std::vector<std::string> given;

  /// The run's settings as a checkpoint stores them, one-line JSON: everything but the
  /// process's own (threads, loader, dumps, resume, timeouts, quiet).
  std::string ToJson() const;
  /// Sets the fields present in `json` (ToJson's keys); others keep their values.
  /// Throws std::invalid_argument when it is not such an object.
  void SetFromJson(const std::string& json);
  bool Given(const std::string& flag) const;
};

// Upper bounds of the resource flags: beyond them a run would not fail but hang, thrash or
// abort (a thread the system refuses to start), so they are refused up front.
constexpr int kMaxBatchSize = 1 << 16;   // --batch-size, items per rank and micro-batch
constexpr int kMaxAccumSteps = 1 << 16;  // --accum-steps
constexpr int kMaxLoaderThreads = 256;   // --loader-threads
constexpr int kMaxPrefetch = 1024;       // --prefetch, batches

/// Checks the flags that need no data: --batch-size, --accum-steps, --loader-threads (or 0) and
/// --prefetch within [1, kMax...], --threads within [0, `cpus`] (more LibTorch threads than
/// CPUs only thrash: 5000 on 2 CPUs never finish a step). Throws std::invalid_argument, one
/// line naming the flag, its value and the bound.
void CheckLimits(const TrainConfig& c, int cpus);

/// Checks that one step's images fit in half of `memory_bytes`: K micro-batches of B images of
/// `image_bytes` held as float32 (4 bytes a pixel channel) for the step, plus `prefetch`
/// uint8 batches in the reader. Throws std::invalid_argument naming the flags and the sizes.
void CheckStepMemory(const TrainConfig& c, uint64_t image_bytes, uint64_t memory_bytes);

/// CPUs this process may run on (its affinity mask), at least 1.
int AvailableCpus();

/// The model's shape: the preset's, overridden by --dim/--layers/--heads/--patch; image size,
/// vocabulary and text length from the shard set. Throws std::invalid_argument naming the
/// flag (unknown preset, non-square images, a patch that does not divide the image size).
ModelConfig MakeModelConfig(const TrainConfig& c, const reader::SetInfo& info);

}  // namespace mm::train
