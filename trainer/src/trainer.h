// trainer.h: the mmtrain training loop (see ../README.md).
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

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amp.h"
#include "checkpoint.h"
#include "config.h"
#include "data.h"
#include "distributed.h"
#include "evaluate.h"
#include "metrics.h"
#include "model.h"

namespace mm::train {

/// One training run: construction opens the data, builds (or resumes) model, optimizer, loader
/// and process group; Run() trains to the end and writes the summary. Not thread-safe; every
/// rank constructs one and runs it in step with the others (collectives inside).
class Trainer {
 public:
  /// Throws std::invalid_argument for bad settings, std::runtime_error for I/O and
  /// rendezvous failures, each a one-line message.
  explicit Trainer(const TrainConfig& config);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  void Run();

 private:
  void OpenData();
  /// Refuses a --resume whose training set differs from --shards (unless --resume-override).
  void CheckResumeShards() const;
  void BuildModel();
  void BuildOptimizer();
  void CreateLoader();
  void MaybeResume();
  void OpenMetrics();

  StepStats TrainStep();
  std::vector<DeviceBatch> FetchMicroBatches(double* wait_s);
  /// Forward and backward over the step's micro-batches; returns {contrastive sum, caption
  /// CE sum} of this rank.
  std::pair<double, double> ForwardBackward(const std::vector<DeviceBatch>& micro,
                                            double global_tokens);
  /// Unscales, (dumps the first step's gradients,) clips, sets `lr` and steps the optimizer.
  /// Returns the gradient norm before clipping (0 when clipping is off).
  double ClipAndStep(double lr);
  void MaybeLog(const StepStats& s);
  void MaybeEvaluate();
  void MaybeCheckpoint();
  void SaveCheckpointTo(const std::string& path);
  void Finish();

  const TrainConfig c_;
  std::optional<Checkpoint> resume_;  // --resume, read and checked first
  DistEnv env_;
  torch::Device device_{torch::kCPU};
  AmpMode amp_ = AmpMode::kOff;
  std::unique_ptr<Distributed> dist_;
  bool lead_ = true;  // rank 0: prints, writes metrics and checkpoints
  std::shared_ptr<reader::ShardSet> set_, val_set_;
  ModelConfig mc_;
  Coca model_{nullptr};
  std::vector<torch::Tensor> params_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<BatchStream> stream_;
  std::unique_ptr<GradReducer> reducer_;
  MetricsLog metrics_;

  int64_t total_steps_ = 0, warmup_ = 0;
  int64_t step_ = 0;       // optimizer steps done (a resumed run starts at the checkpoint's)
  int64_t steps_run_ = 0;  // optimizer steps this process ran
  double best_val_ = 1e30;
  int64_t evals_since_best_ = 0;
  bool stopped_early_ = false;
  MetricsWindow window_, run_;  // the current log window; the whole run
  double first_caption_ = -1, last_caption_ = 0, last_loss_ = 0;
  EvalResult last_eval_;
  Clock::time_point run_start_;
  double cpu_start_ = 0;
  std::vector<DeviceBatch> reused_micro_;  // --reuse-batches
};

}  // namespace mm::train
