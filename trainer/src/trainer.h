// trainer.h: the mmtrain training loop (see ../README.md and issue 4).
//
// One optimizer step = accum_steps micro-batches of batch_size items on each of world_size
// ranks. Loss of one micro-batch on rank r:
//   w_contrastive * InfoNCE(micro-batch) / K  +  w_caption * W * CE_sum(micro-batch) / N
// where CE_sum is the summed next-token cross-entropy, N the number of predicted tokens over
// all K micro-batches of all W ranks (all-reduced before the forward passes), and the
// Reducer averages gradients over the W ranks. So the captioning gradient is exactly that of
// one batch of K*W*B items: sum of token losses / token count.
// The contrastive loss cannot be made equivalent that way: InfoNCE's negatives are the other
// items of the same similarity matrix, so each micro-batch on each rank sees only its own B-1
// negatives (not the K*W*B-1 of a true large batch); the trainer averages the per-micro-batch,
// per-rank losses. (Gathering embeddings across ranks, as open_clip's gather_with_grad does,
// would widen the negatives over ranks; it is not done here.)
#pragma once

#include <cstdint>
#include <string>

namespace mm::train {

struct TrainConfig {
  std::string shards;          // --shards: training shard set (directory, s3://, http(s)://)
  std::string val_shards;      // --val-shards: evaluation set ("" = no evaluation)
  std::string out;             // --out RUN: metrics.jsonl, checkpoints, summary.json
  std::string preset = "cpu";  // cpu | gpu: default model size
  int64_t dim = 0, layers = 0, heads = 0, patch = 0;  // 0: the preset's value
  double w_contrastive = 1.0, w_caption = 1.0;        // --loss-weights "c,k"
  std::string amp = "off";                            // off | bf16 | fp16
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
  int64_t patience = 0;        // evaluations without val-loss improvement before stopping
  std::string resume;          // checkpoint file to continue from
  int64_t stop_after = 0;      // leave after this step as if killed (schedule still --steps)
  std::string dump_params;     // write final parameters (torch::save of a tensor list)
  std::string dump_grads;      // write the first step's (reduced) gradients, then go on
  double dist_timeout_s = 60;  // c10d rendezvous and collective timeout, seconds
  int threads = 0;             // LibTorch intra-op threads (0: LibTorch's default)
  int loader_threads = 2;      // reader decode threads
  int prefetch = 4;            // reader batches in flight
  bool shuffle = true;
  std::string shuffle_mode = "auto";  // --shuffle: auto | global | block (reader.h ShuffleMode)
  int shuffle_window = 0;             // --shuffle-window: block shuffle's shards per window
  std::string cache_dir;              // --cache-dir: remote sets' cache ("" : XDG default)
  int64_t cache_limit = 0;            // --cache-limit: bytes the cache may hold (0: no limit)
  int64_t eval_max = 0;               // evaluate on at most this many val samples (0: all)
  bool quiet = false;
  bool reuse_batches =
      false;  // benchmark baseline: the first step's batches every step
              // (model compute without the reader)            // no per-step log lines on stdout
  std::string ToJson() const;
};

/// This process's rank as the launcher's environment says (0 when none); never throws.
int RankFromEnvironment();

/// Runs training. Throws std::exception with a one-line message on any error.
void Train(const TrainConfig& config);

}  // namespace mm::train
