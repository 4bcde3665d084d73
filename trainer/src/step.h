// step.h: forward and backward of one optimizer step on this rank: K micro-batches of B items,
// the contrastive loss over the whole global batch (K*B items on each of W ranks), the
// captioning loss over all its tokens, gradients left in the parameters (reduced over ranks).
//
// Loss of the step, the same as one process with one batch of K*W*B items:
//   w_contrastive * InfoNCE(global batch)  +  w_caption * CE_sum(global batch) / N
// N = predicted tokens of the global batch (all-reduced before any forward pass).
//
// K == 1: one forward with gradient; the embeddings are all-gathered with gradient
// (contrastive.h) and the loss backpropagates through the gather.
// K > 1: gradient caching (GradCache: Gao et al. 2021, "Scaling Deep Contrastive Learning
// Batch Size under Memory Limited Setup", arXiv:2101.06983):
//   1. embeddings of all K micro-batches without a graph (the encoders only, no decoder);
//   2. InfoNCE over the cached, all-gathered embeddings; its backward gives d loss / d
//      embedding for this rank's K*B rows and d loss / d logit_scale (one gather, one all-reduce
//      of embedding gradients per step);
//   3. per micro-batch: forward again with a graph, backward of
//      sum(embedding * its cached gradient) + the caption loss (+ logit_scale * its gradient on
//      the last micro-batch), so the parameters receive exactly the chain rule's gradient.
// Memory: one micro-batch's activations plus the K*B cached embeddings and their gradients.
// Why not open_clip's --accum-freq feature cache: it recomputes each micro-batch too, but then
// evaluates the whole loss again K times with that micro-batch's rows live, and under DDP each
// of those K losses needs its own all-gather with gradient (K gathers and K gradient
// all-reduces per step); GradCache needs one of each, and its per-micro-batch backward is a
// dot product with a cached gradient.
//
// The Reducer is armed only before the last micro-batch's backward (DDP's no_sync before it);
// every parameter takes part in that backward (logit_scale through its cached gradient).
#pragma once

#include <torch/torch.h>

#include <vector>

#include "amp.h"
#include "data.h"
#include "distributed.h"
#include "model.h"

namespace mm::train {

/// What a step needs besides its batches. Pointers are not owned; reducer is null without DDP.
struct StepContext {
  mutable Coca model{nullptr};  // a shared handle (forward is not const)
  Distributed* dist = nullptr;
  GradReducer* reducer = nullptr;
  LossScaler* scaler = nullptr;
  double w_contrastive = 1.0, w_caption = 1.0;
  bool local_loss = false;  // --local-loss: this rank's rows against all columns
  AmpMode amp = AmpMode::kOff;
  torch::Device device{torch::kCPU};
};

/// This rank's view of the step's losses.
struct StepLosses {
  double contrastive = 0;  // InfoNCE over the global batch (with --local-loss: this rank's rows)
  double caption_sum = 0;  // summed caption cross-entropy of this rank's micro-batches, nats
};

/// Runs forward and backward over `micro` (K micro-batches of equal
/// size, the same K and B on every rank) and adds the scaled gradients to the parameters' (the
/// caller zeroes them first).
/// `global_tokens`: N above. A collective: every rank calls it at the same step.
StepLosses ForwardBackward(const StepContext& ctx, const std::vector<DeviceBatch>& micro,
                           double global_tokens);

}  // namespace mm::train
