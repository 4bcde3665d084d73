// contrastive.h: InfoNCE over the global batch under data parallelism.
//
// Each rank holds B rows of image and text embeddings. AllGatherWithGrad concatenates every
// rank's rows (forward: an all-gather over the c10d group) and sends back to each rank the
// gradient of its own rows summed over all ranks (backward: an all-reduce of the gathered
// gradient, then this rank's slice; open_clip's gather_with_grad uses torch.distributed.nn's
// all_gather, whose backward is a reduce-scatter, which Gloo lacks). Every rank's loss then
// sees all N = W*B items as negatives.
//
// Scaling: with the full loss every rank computes the same L over the N x N matrix; the
// backward sum over ranks gives each rank's rows W * dL/dx, and the Reducer's mean over ranks
// divides the W back out: the gradient of one process with batch N. With --local-loss rank r
// computes L_r over its B rows against all N columns (open_clip's local_loss: B x N logits
// instead of N x N); L = mean_r L_r, the sum over ranks again gives W * dL/dx. Both are the
// gradient of one process with the whole batch, up to float summation order.
#pragma once

#include <torch/torch.h>

#include "distributed.h"

namespace mm::train {

/// x [B,E] on each of W ranks -> [W*B,E], rank r's rows at [r*B, (r+1)*B), differentiable
/// (see above). B must be the same on every rank. Without a process group returns x.
torch::Tensor AllGatherWithGrad(const torch::Tensor& x, Distributed& dist);

/// Symmetric InfoNCE (CLIP; CoCa eq. 1) of this rank's rows against the global batch.
/// local_img, local_txt [B,E] L2-normalised (this rank's, carrying gradient); all_img,
/// all_txt [N,E] their AllGatherWithGrad; logit_scale []. `local_loss` false: the loss over
/// the whole N x N matrix (the same value on every rank); true: over this rank's B rows of
/// both directions, labels rank*B + i. Returns [] float32, a mean over rows.
torch::Tensor GlobalContrastiveLoss(const torch::Tensor& local_img, const torch::Tensor& local_txt,
                                    const torch::Tensor& all_img, const torch::Tensor& all_txt,
                                    const torch::Tensor& logit_scale, int rank, bool local_loss);

}  // namespace mm::train
