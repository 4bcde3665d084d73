// resume_plan.h: which settings a resumed run takes, and which differences it refuses.
//
// On --resume every setting the command line does not give comes from the checkpoint's
// config. A given flag whose value differs from the checkpoint's is a change; a change of
// the optimisation (model shape, loss weights, AMP, LR schedule, steps, seed and data order, or
// the global batch) is refused unless --resume-override. How the global batch is split is not
// the optimisation: K x B on W ranks gives the same gradients as 1 x K*W*B (step.h), so
// another world size is accepted when the global batch stays the same (elastic restarts); the
// loader resumes at another world size by itself. With neither --batch-size nor
// --accum-steps given, a new world size takes the per-rank batch that keeps the global batch.
// No LibTorch header.
#pragma once

#include <string>
#include <vector>

#include "config.h"

namespace mm::train {

/// A given flag whose value differs from the checkpoint's.
struct ResumeChange {
  std::string what;   // "--lr", or "global batch (--batch-size x --accum-steps x ranks)"
  std::string saved;  // the checkpoint's value, JSON
  std::string now;    // this run's value, JSON
  bool optimisation;  // changes the optimisation: refused without --resume-override
};

struct ResumePlan {
  TrainConfig config;                 // the resumed run's settings
  std::vector<ResumeChange> changes;  // in flag order; derived batch splits included
};

/// `cli`: the command line's settings (cli.given names the flags given). `saved_json`: the
/// checkpoint's TrainConfig::ToJson, trained on `saved_world` ranks; `world`: ranks now.
/// `saved_model_json`: the checkpoint's ModelConfig::ToJson ("" if unknown), whose shape
/// stands for a --dim/--layers/--heads/--patch the saved config left to the preset (0), so a
/// change names the model's real value ("--dim 64 (checkpoint: 128)").
/// Throws std::invalid_argument when the saved global batch cannot be split over `world`
/// ranks with the saved --accum-steps and neither split flag is given.
ResumePlan PlanResume(const TrainConfig& cli, const std::string& saved_json, int saved_world,
                      int world, const std::string& saved_model_json = "");

/// The changes as a JSON array of {"flag", "checkpoint", "now", "changes_optimisation"}.
std::string ChangesToJson(const std::vector<ResumeChange>& changes);
/// One change in words: "--lr 0.005 (checkpoint: 0.001), changes the optimisation".
std::string DescribeChange(const ResumeChange& change);

/// The refused changes in one line: "--lr 0.002 (checkpoint: 0.001), --amp \"bf16\" ...".
std::string DescribeRefused(const std::vector<ResumeChange>& changes);

}  // namespace mm::train
