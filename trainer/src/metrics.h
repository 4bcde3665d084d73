// metrics.h: what a run reports: per-step figures summed over a log window, the log lines on
// stdout, and RUN/metrics.jsonl: one JSON object per line, each with "event" ("start",
// "resume", "train", "eval", "summary"), "step" (optimizer steps done) and "time" (wall
// clock, seconds since the Unix epoch). A resumed run first moves the lines past its
// checkpoint's step (written by the run that died after it) to metrics.superseded.jsonl, so
// metrics.jsonl never holds a step twice.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "evaluate.h"
#include "files.h"
#include "gpu_monitor.h"

namespace mm::train {

/// One optimizer step as the whole world saw it.
struct StepStats {
  double loss = 0;         // w_c * contrastive + w_cap * caption
  double contrastive = 0;  // InfoNCE, mean over micro-batches and ranks
  double caption = 0;      // caption cross-entropy per predicted token of the global batch
  double lr = 0;
  double grad_norm = 0;  // before clipping (0 when clipping is off)
  double wait_s = 0;     // seconds blocked in the reader
  double time_s = 0;     // seconds of the whole step
  int64_t samples = 0;   // items in the global batch
  bool skipped = false;  // fp16: inf/NaN gradients, the optimizer step was skipped
};

/// Sums over a span of steps (a log window, or the whole run).
struct MetricsWindow {
  double wait_s = 0, time_s = 0, loss = 0, contrastive = 0, caption = 0;
  int64_t steps = 0, samples = 0;
  int64_t skipped = 0;  // steps skipped by the loss scaler (inf/NaN gradients)
  GpuStats gpu;         // GPU samples over the span (none without NVML or a GPU)

  void Add(const StepStats& s);
  double samples_per_s() const { return samples / std::max(time_s, 1e-9); }
  /// Time blocked in the reader over step time, percent.
  double wait_pct() const { return 100.0 * wait_s / std::max(time_s, 1e-9); }
  double mean_loss() const { return loss / steps; }
  double mean_contrastive() const { return contrastive / steps; }
  double mean_caption() const { return caption / steps; }
};

/// RUN/metrics.jsonl, appended to; a closed log ignores Emit (ranks other than 0, no --out).
class MetricsLog {
 public:
  /// Throws std::runtime_error naming the file when it cannot be opened or is not a regular
  /// file (a FIFO is refused, not waited on).
  void Open(const std::string& path);
  /// Appends `record` with "time" added as one line and flushes it. Throws std::runtime_error
  /// when the write fails.
  void Emit(const nlohmann::json& record);

 private:
  std::string path_;
  FilePtr file_;
};

/// Moves the lines of `path` whose "step" is past `step`, and the lines that are no JSON object
/// (cut short by a kill), to the end of `superseded` (both regular files; `path` rewritten
/// atomically). Other lines without a step stay. Returns the number
/// moved (0 when `path` does not exist). Throws std::runtime_error naming the file.
int64_t MoveLinesPastStep(const std::string& path, const std::string& superseded, int64_t step);

/// What a run did, for its "summary" record and last line.
struct RunSummary {
  int64_t step = 0;              // optimizer steps done, a resumed start included
  int64_t steps_run = 0;         // optimizer steps this process ran
  double wall_s = 0, cpu_s = 0;  // this process: wall clock and CPU (all threads), seconds
  MetricsWindow run;             // the whole run
  double final_loss = 0, first_caption = 0, final_caption = 0;
  bool stopped_early = false;
  // Gradient reductions of the steps run: one round per step however many micro-batches
  // (--accum-steps), each round one all-reduce per bucket.
  int64_t allreduce_rounds = 0, allreduce_buckets = 0;
  EvalResult last_eval;  // n == 0: none
  double best_val = 0;   // best val caption loss
  bool fp16 = false;     // loss scaling on: the summary reports the final scale
  double loss_scale = 1;
};
nlohmann::json SummaryRecord(const RunSummary& r);
void PrintSummaryLine(const RunSummary& r);

/// The "train" record of a window ending at `step`, and its stdout line. GPU fields
/// (gpu_util_pct: mean utilisation over the window's samples, gpu_mem_used_mib: the most
/// memory in use on the device, gpu_mem_total_mib) only when the window has GPU samples.
nlohmann::json TrainRecord(int64_t step, const MetricsWindow& w, const StepStats& last,
                           int64_t epoch, double loss_scale);
void PrintTrainLine(int64_t step, int64_t total_steps, const MetricsWindow& w, double lr,
                    bool show_scale, double loss_scale);
/// Adds the GPU fields of `gpu` to `record` (nothing when it has no samples).
void AddGpuFields(const GpuStats& gpu, nlohmann::json* record);

/// The "eval" record of an evaluation at `step`, and its stdout line (`seconds` it took).
nlohmann::json EvalRecord(int64_t step, const EvalResult& e);
void PrintEvalLine(int64_t step, const EvalResult& e, double seconds);

}  // namespace mm::train
