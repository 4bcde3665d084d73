#include "step.h"

#include "contrastive.h"

namespace mm::train {

namespace {

/// InfoNCE of this rank's [R,E] rows over the global batch (gathered with gradient).
torch::Tensor ContrastiveOverWorld(const StepContext& ctx, const torch::Tensor& img,
                                   const torch::Tensor& txt, const torch::Tensor& logit_scale) {
  auto all_img = AllGatherWithGrad(img, *ctx.dist);
  auto all_txt = AllGatherWithGrad(txt, *ctx.dist);
  return GlobalContrastiveLoss(img, txt, all_img, all_txt, logit_scale, ctx.dist->rank(),
                               ctx.local_loss);
}

/// Weight of a micro-batch's summed caption CE: w_caption * W / N (the Reducer divides by W).
double CaptionWeight(const StepContext& ctx, double global_tokens) {
  return ctx.w_caption * ctx.dist->world_size() / global_tokens;
}

void Backward(const StepContext& ctx, const torch::Tensor& loss, bool last) {
  if (ctx.reducer && last) ctx.reducer->PrepareForBackward({loss});
  ctx.scaler->Scale(loss).backward();
}

/// K == 1: one forward, the loss backpropagates through the gather.
StepLosses Direct(const StepContext& ctx, const DeviceBatch& d, double global_tokens) {
  torch::Tensor con, cap;
  {
    AutocastScope autocast(ctx.amp, ctx.device);
    auto out = ctx.model->forward(d.images, d.tokens, d.lengths);
    con = ContrastiveOverWorld(ctx, out.image_embed, out.text_embed, out.logit_scale);
    cap = CaptionLossSum(out.logits, d.tokens, d.lengths);
  }
  Backward(ctx, con * ctx.w_contrastive + cap * CaptionWeight(ctx, global_tokens), true);
  return {con.item<double>(), cap.item<double>()};
}

/// Gradients of the step's contrastive loss with respect to the cached embeddings.
struct EmbeddingGrads {
  std::vector<torch::Tensor> img, txt;  // K x [B,E]
  torch::Tensor logit_scale;            // []
  double loss = 0;
};

/// GradCache steps 1 and 2 (see step.h).
EmbeddingGrads CacheEmbeddingGrads(const StepContext& ctx, const std::vector<DeviceBatch>& micro) {
  std::vector<torch::Tensor> img, txt;
  {
    torch::NoGradGuard no_grad;
    AutocastScope autocast(ctx.amp, ctx.device);
    for (const auto& d : micro) {
      auto [i, t] = ctx.model->Embed(d.images, d.tokens, d.lengths);  // [B,E] each
      img.push_back(i);
      txt.push_back(t);
    }
  }
  auto cache_img = torch::cat(img).requires_grad_(), cache_txt = torch::cat(txt).requires_grad_();
  auto scale = ctx.model->LogitScale().detach().requires_grad_();
  auto con = ContrastiveOverWorld(ctx, cache_img, cache_txt, scale);
  (con * ctx.w_contrastive).backward();
  const int64_t b = micro.front().images.size(0);
  return {cache_img.grad().split(b), cache_txt.grad().split(b), scale.grad(), con.item<double>()};
}

/// K > 1: GradCache.
StepLosses Cached(const StepContext& ctx, const std::vector<DeviceBatch>& micro,
                  double global_tokens) {
  const EmbeddingGrads g = CacheEmbeddingGrads(ctx, micro);
  StepLosses losses{g.loss, 0};
  const size_t k_last = micro.size() - 1;
  for (size_t k = 0; k < micro.size(); ++k) {
    const auto& d = micro[k];
    torch::Tensor surrogate, cap;
    {
      AutocastScope autocast(ctx.amp, ctx.device);
      auto out = ctx.model->forward(d.images, d.tokens, d.lengths);
      surrogate = (out.image_embed * g.img[k]).sum() + (out.text_embed * g.txt[k]).sum();
      if (k == k_last) surrogate = surrogate + out.logit_scale * g.logit_scale;
      cap = CaptionLossSum(out.logits, d.tokens, d.lengths);
    }
    Backward(ctx, surrogate + cap * CaptionWeight(ctx, global_tokens), k == k_last);
    losses.caption_sum += cap.item<double>();
  }
  return losses;
}

}  // namespace

StepLosses ForwardBackward(const StepContext& ctx, const std::vector<DeviceBatch>& micro,
                           double global_tokens) {
  return micro.size() == 1 ? Direct(ctx, micro.front(), global_tokens)
                           : Cached(ctx, micro, global_tokens);
}

}  // namespace mm::train
