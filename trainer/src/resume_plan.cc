#include "resume_plan.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace mm::train {

namespace {

struct FlagField {
  const char* flag;
  const char* key;    // in TrainConfig::ToJson
  bool optimisation;  // a different value changes the optimisation
};

// --batch-size and --accum-steps are judged by the global batch they make (see resume_plan.h);
// --shards by the set's identity (Trainer::CheckResumeShards).
constexpr FlagField kFields[] = {
    {"--shards", "shards", false},
    {"--val-shards", "val_shards", false},
    {"--out", "out", false},
    {"--preset", "preset", true},
    {"--dim", "dim", true},
    {"--layers", "layers", true},
    {"--heads", "heads", true},
    {"--patch", "patch", true},
    {"--loss-weights", "loss_weights", true},
    {"--local-loss", "local_loss", false},
    {"--amp", "amp", true},
    {"--device", "device", false},
    {"--batch-size", "batch_size", false},
    {"--accum-steps", "accum_steps", false},
    {"--steps", "steps", true},
    {"--epochs", "epochs", true},
    {"--lr", "lr", true},
    {"--weight-decay", "weight_decay", true},
    {"--warmup", "warmup", true},
    {"--clip-grad", "clip_grad", true},
    {"--seed", "seed", true},
    {"--no-shuffle", "shuffle", true},
    {"--shuffle", "shuffle_mode", true},
    {"--shuffle-window", "shuffle_window", true},
    {"--log-every", "log_every", false},
    {"--eval-every", "eval_every", false},
    {"--save-every", "save_every", false},
    {"--patience", "patience", false},
    {"--eval-max", "eval_max", false},
    {"--augment", "augment", true},
};

/// Keeps the saved global batch B*K*W: derives B for another world size when the command line
/// leaves the split to the checkpoint; records a changed global batch.
void PlanGlobalBatch(const TrainConfig& cli, const TrainConfig& saved, int saved_world, int world,
                     ResumePlan* plan) {
  TrainConfig& c = plan->config;
  const int64_t saved_global = int64_t{saved.batch_size} * saved.accum_steps * saved_world;
  if (!cli.Given("--batch-size") && !cli.Given("--accum-steps") && world != saved_world) {
    const int64_t per_rank = int64_t{c.accum_steps} * world;
    if (saved_global % per_rank != 0) {
      throw std::invalid_argument(
          "--resume: the checkpoint's global batch of " + std::to_string(saved_global) + " (" +
          std::to_string(saved.batch_size) + " x " + std::to_string(saved.accum_steps) + " x " +
          std::to_string(saved_world) + " ranks) does not split over " + std::to_string(world) +
          " ranks; give --batch-size and --accum-steps with B x K x " + std::to_string(world) +
          " = " + std::to_string(saved_global));
    }
    c.batch_size = static_cast<int>(saved_global / per_rank);
    plan->changes.push_back({"--batch-size (world size " + std::to_string(saved_world) + " -> " +
                                 std::to_string(world) + ", same global batch)",
                             std::to_string(saved.batch_size), std::to_string(c.batch_size),
                             false});
  }
  const int64_t global = int64_t{c.batch_size} * c.accum_steps * world;
  if (global != saved_global) {
    plan->changes.push_back({"global batch (--batch-size x --accum-steps x ranks)",
                             std::to_string(saved_global), std::to_string(global), true});
  }
}

// The checkpoint's value of `key`: its config's, except that a model shape left to the preset
// (0 in the config: "--dim 0") is the value the saved model has (`model`: ModelConfig::ToJson).
nlohmann::json SavedValue(const nlohmann::json& saved, const nlohmann::json& model,
                          const std::string& key) {
  const nlohmann::json& v = saved.at(key);
  const bool shape = key == "dim" || key == "layers" || key == "heads" || key == "patch";
  if (shape && v.is_number_integer() && v.get<int64_t>() == 0 && model.is_object() &&
      model.contains(key)) {
    return model.at(key);
  }
  return v;
}

}  // namespace

ResumePlan PlanResume(const TrainConfig& cli, const std::string& saved_json, int saved_world,
                      int world, const std::string& saved_model_json) {
  const auto saved = nlohmann::json::parse(saved_json, nullptr, /*allow_exceptions=*/false);
  if (!saved.is_object()) throw std::invalid_argument("--resume: the checkpoint has no config");
  const auto model = nlohmann::json::parse(saved_model_json, nullptr, /*allow_exceptions=*/false);
  const auto now = nlohmann::json::parse(cli.ToJson());
  nlohmann::json merged = saved;
  ResumePlan plan;
  for (const auto& f : kFields) {
    if (!cli.Given(f.flag)) continue;
    merged[f.key] = now.at(f.key);
    if (!saved.contains(f.key)) continue;
    const nlohmann::json was = SavedValue(saved, model, f.key);
    if (was != now.at(f.key)) {
      plan.changes.push_back({f.flag, was.dump(), now.at(f.key).dump(), f.optimisation});
    }
  }
  plan.config = cli;  // the process's own settings (threads, dumps, ...) stay the command line's
  plan.config.SetFromJson(merged.dump());
  TrainConfig saved_config;
  saved_config.SetFromJson(saved_json);
  PlanGlobalBatch(cli, saved_config, saved_world, world, &plan);
  return plan;
}

std::string ChangesToJson(const std::vector<ResumeChange>& changes) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& c : changes) {
    a.push_back({{"flag", c.what},
                 {"checkpoint", nlohmann::json::parse(c.saved)},
                 {"now", nlohmann::json::parse(c.now)},
                 {"changes_optimisation", c.optimisation}});
  }
  return a.dump();
}

std::string DescribeChange(const ResumeChange& c) {
  return c.what + " " + c.now + " (checkpoint: " + c.saved + ")" +
         (c.optimisation ? ", changes the optimisation (--resume-override)" : "");
}

std::string DescribeRefused(const std::vector<ResumeChange>& changes) {
  std::string s;
  for (const auto& c : changes) {
    if (!c.optimisation) continue;
    s += (s.empty() ? "" : ", ") + c.what + " " + c.now + " (checkpoint: " + c.saved + ")";
  }
  return s;
}

}  // namespace mm::train
