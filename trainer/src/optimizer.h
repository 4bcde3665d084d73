// optimizer.h: AdamW with the usual decay groups, and the learning-rate schedule.
#pragma once

#include <torch/torch.h>

#include <memory>

namespace mm::train {

/// AdamW (Loshchilov & Hutter 2019) over `model`'s parameters: betas (0.9, 0.98), eps 1e-6,
/// `weight_decay` on weight matrices only (none on biases, norms, positional/cls embeddings
/// and the temperature: parameters of fewer than 2 dimensions or named *pos* / *cls*).
std::unique_ptr<torch::optim::AdamW> MakeAdamW(torch::nn::Module& model, double lr,
                                               double weight_decay);

/// Learning rate of optimizer step `step` (0-based) of `total`: linear warmup to `lr` over
/// `warmup` steps, then cosine decay to 0 at `total` (SGDR without restarts).
double LearningRate(double lr, int64_t step, int64_t total, int64_t warmup);

}  // namespace mm::train
