// trainer.h: the mmtrain training loop (see ../README.md): the Trainer class, which owns the
// run's data, model, optimizer, process group and metrics. How one step's loss and gradients
// are computed (global-batch contrastive loss, gradient caching for accumulation): step.h.
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
#include "device_feeder.h"
#include "distributed.h"
#include "evaluate.h"
#include "gpu_monitor.h"
#include "metrics.h"
#include "model.h"
#include "resume_plan.h"
#include "step.h"

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
  /// Reads --resume and takes the settings the command line leaves out from it; refuses a
  /// given flag that changes the optimisation unless --resume-override (resume_plan.h).
  void PlanFromCheckpoint(const TrainConfig& given);
  void OpenData();
  /// Refuses a --resume whose training set differs from --shards (unless --resume-override).
  void CheckResumeShards() const;
  void BuildModel();
  void BuildOptimizer();
  void CreateLoader();
  void MaybeResume();
  void OpenMetrics();

  /// The "start" (or "resume") line on stdout and in metrics.jsonl.
  void LogStart();
  StepStats TrainStep();
  std::vector<DeviceBatch> FetchMicroBatches(double* wait_s);
  /// Unscales, (dumps the first step's gradients,) clips, sets s->lr and steps the optimizer
  /// unless the loss scaler found inf/NaN gradients. Sets s->grad_norm (before clipping, 0
  /// when clipping is off) and s->skipped.
  void ClipAndStep(StepStats* s);
  void MaybeLog(const StepStats& s);
  void MaybeEvaluate();
  void MaybeCheckpoint();
  void SaveCheckpointTo(const std::string& path);
  void Finish();

  TrainConfig c_;                             // the command line's, merged with --resume's
  std::optional<Checkpoint> resume_;          // --resume, read and checked first; until restored
  bool resumed_ = false;                      // this run continues a checkpoint
  std::vector<ResumeChange> resume_changes_;  // flags given on --resume that differ
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
  std::unique_ptr<DeviceFeeder> feeder_;  // reads stream_ (declared after it: destroyed first)
  std::unique_ptr<GpuMonitor> gpu_;       // rank 0 on CUDA; null elsewhere
  std::unique_ptr<GradReducer> reducer_;
  StepContext step_context_;
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
