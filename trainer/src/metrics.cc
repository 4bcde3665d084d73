#include "metrics.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace mm::train {

void MetricsWindow::Add(const StepStats& s) {
  wait_s += s.wait_s, time_s += s.time_s, loss += s.loss, contrastive += s.contrastive,
      caption += s.caption, steps += 1, samples += s.samples, skipped += s.skipped;
}

void AddGpuFields(const GpuStats& gpu, nlohmann::json* record) {
  if (gpu.samples == 0) return;
  (*record)["gpu_util_pct"] = gpu.util_mean_pct();
  (*record)["gpu_mem_used_mib"] = gpu.mem_used_max_mib;
  (*record)["gpu_mem_total_mib"] = gpu.mem_total_mib;
}

void MetricsLog::Open(const std::string& path) {
  path_ = path;
  file_ = OpenRegularForAppend(path);
}

void MetricsLog::Emit(const nlohmann::json& record) {
  if (!file_) return;
  nlohmann::json r = record;
  r["time"] =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string line = r.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_.get()) != line.size() ||
      std::fflush(file_.get()) != 0) {
    throw std::runtime_error("cannot write " + path_);
  }
}

int64_t MoveLinesPastStep(const std::string& path, const std::string& superseded, int64_t step) {
  if (::access(path.c_str(), F_OK) != 0) return 0;
  const std::string text = ReadWholeFile(path, int64_t{1} << 32, "reading metrics");
  std::string kept, moved;
  int64_t n = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    // A line that is no JSON object was cut by a kill: moved too, so the records appended
    // after it start a line of their own and the log stays one JSON object a line.
    const bool past = !j.is_object() || (j.contains("step") && j["step"].is_number() &&
                                         j["step"].get<double>() > static_cast<double>(step));
    (past ? moved : kept) += line + "\n";
    n += past;
  }
  if (n == 0) return 0;
  FilePtr out = OpenRegularForAppend(superseded);
  if (std::fwrite(moved.data(), 1, moved.size(), out.get()) != moved.size() ||
      std::fflush(out.get()) != 0) {
    throw std::runtime_error("cannot write " + superseded);
  }
  WriteFileAtomically(path, kept);
  return n;
}

nlohmann::json SummaryRecord(const RunSummary& r) {
  nlohmann::json s = {{"event", "summary"},
                      {"step", r.step},
                      {"steps", r.step},
                      {"wall_s", r.wall_s},
                      {"samples", r.run.samples},
                      {"samples_per_s", r.run.samples_per_s()},
                      {"data_wait_pct", r.run.wait_pct()},
                      {"cpu_ms_per_sample", 1000.0 * r.cpu_s / std::max<int64_t>(r.run.samples, 1)},
                      {"final_loss", r.final_loss},
                      {"first_caption_loss", r.first_caption},
                      {"final_caption_loss", r.final_caption},
                      {"stopped_early", r.stopped_early},
                      {"steps_run", r.steps_run},
                      {"allreduce_rounds", r.allreduce_rounds},
                      {"allreduce_buckets", r.allreduce_buckets},
                      {"skipped_steps", r.run.skipped}};
  if (r.fp16) s["loss_scale"] = r.loss_scale;
  AddGpuFields(r.run.gpu, &s);
  if (r.last_eval.n > 0) {
    s["val_caption_loss"] = r.last_eval.caption_loss;
    s["val_perplexity"] = r.last_eval.perplexity;
    s["val_i2t_r5"] = r.last_eval.i2t[1];
    s["val_t2i_r5"] = r.last_eval.t2i[1];
    s["val_n"] = r.last_eval.n;
    s["best_val_caption_loss"] = r.best_val;
  }
  return s;
}

void PrintSummaryLine(const RunSummary& r) {
  std::printf(
      "done: %lld steps in %.1f s, %.1f samples/s, data-wait %.2f%%, caption loss %.4f -> "
      "%.4f\n",
      static_cast<long long>(r.step), r.wall_s, r.run.samples_per_s(), r.run.wait_pct(),
      r.first_caption, r.final_caption);
  std::fflush(stdout);
}

nlohmann::json TrainRecord(int64_t step, const MetricsWindow& w, const StepStats& last,
                           int64_t epoch, double loss_scale) {
  nlohmann::json r = {{"event", "train"},
                      {"step", step},
                      {"loss", w.mean_loss()},
                      {"contrastive", w.mean_contrastive()},
                      {"caption", w.mean_caption()},
                      {"lr", last.lr},
                      {"grad_norm", last.grad_norm},
                      {"samples_per_s", w.samples_per_s()},
                      {"data_wait_pct", w.wait_pct()},
                      {"epoch", epoch},
                      {"loss_scale", loss_scale},
                      {"skipped_steps", w.skipped}};
  AddGpuFields(w.gpu, &r);
  return r;
}

void PrintTrainLine(int64_t step, int64_t total_steps, const MetricsWindow& w, double lr,
                    bool show_scale, double loss_scale) {
  std::string extra;
  if (w.gpu.samples > 0) {
    char gpu[96];
    std::snprintf(gpu, sizeof gpu, "  gpu %.0f%% %.0f/%.0f MiB", w.gpu.util_mean_pct(),
                  w.gpu.mem_used_max_mib, w.gpu.mem_total_mib);
    extra += gpu;
  }
  if (show_scale) {
    extra += "  scale " + std::to_string(loss_scale);
    if (w.skipped > 0) extra += " (" + std::to_string(w.skipped) + " skipped)";
  }
  std::printf(
      "step %6lld/%lld  loss %.4f (contrastive %.4f caption %.4f)  lr %.3e  %.1f samples/s  "
      "data-wait %.1f%%%s\n",
      static_cast<long long>(step), static_cast<long long>(total_steps), w.mean_loss(),
      w.mean_contrastive(), w.mean_caption(), lr, w.samples_per_s(), w.wait_pct(), extra.c_str());
  std::fflush(stdout);
}

nlohmann::json EvalRecord(int64_t step, const EvalResult& e) {
  const double n = static_cast<double>(e.n);
  return {{"event", "eval"},
          {"step", step},
          {"caption_loss", e.caption_loss},
          {"perplexity", e.perplexity},
          {"n", e.n},
          {"scored", e.scored},
          {"i2t_r1", e.i2t[0]},
          {"i2t_r5", e.i2t[1]},
          {"i2t_r10", e.i2t[2]},
          {"t2i_r1", e.t2i[0]},
          {"t2i_r5", e.t2i[1]},
          {"t2i_r10", e.t2i[2]},
          {"chance_r1", std::min(1.0, 1 / n)},
          {"chance_r5", std::min(1.0, 5 / n)},
          {"chance_r10", std::min(1.0, 10 / n)}};
}

void PrintEvalLine(int64_t step, const EvalResult& e, double seconds) {
  const double n = static_cast<double>(e.n);
  std::printf(
      "eval  %6lld  val caption loss %.4f  ppl %.1f  i2t R@1/5/10 %.3f/%.3f/%.3f  t2i "
      "R@1/5/10 %.3f/%.3f/%.3f  (chance %.3f/%.3f/%.3f, N=%lld)  %.1fs\n",
      static_cast<long long>(step), e.caption_loss, e.perplexity, e.i2t[0], e.i2t[1], e.i2t[2],
      e.t2i[0], e.t2i[1], e.t2i[2], std::min(1.0, 1 / n), std::min(1.0, 5 / n),
      std::min(1.0, 10 / n), static_cast<long long>(e.n), seconds);
  std::fflush(stdout);
}

}  // namespace mm::train
