// model.h: a CoCa-style image-text model (Yu et al. 2022, "CoCa: Contrastive Captioners are
// Image-Text Foundation Models", arXiv:2205.01917), small enough to train on a CPU.
//
//   image [B,3,H,W] float -> conv patchify (patch P) -> [B,N,D] + pos-emb, cls token prepended
//     -> `layers` pre-LN transformer blocks (bidirectional) -> LayerNorm
//     -> image tokens [B,N+1,D]; pooled image embedding = cls token -> Linear -> [B,E]
//   tokens [B,L] int64 -> token-emb + pos-emb -> `layers` causal pre-LN blocks (unimodal text)
//     -> LayerNorm; pooled text embedding = hidden state of the last valid token -> Linear [B,E]
//   fusion decoder: `layers` blocks of causal self-attention, cross-attention from text to the
//     image tokens, MLP; each a residual around a pre-LayerNorm -> LayerNorm -> LM head (tied
//     to the token embedding) -> logits [B,L,V]
//
// Losses: symmetric InfoNCE over the batch with a learnable temperature (CLIP) on the pooled
// embeddings, and next-token cross-entropy through the fusion decoder ignoring padding.
// No dropout anywhere: a step is a deterministic function of parameters and batch, which
// makes --resume bitwise exact on CPU.
//
// Padding needs no key mask: pads sit after a caption's last token and attention is causal,
// so no valid position ever attends to a pad; outputs at pad positions are never used.
#pragma once

#include <torch/torch.h>

#include <string>

#include "config.h"

namespace mm::train {

/// Multi-head attention on [B, T, D] (batch first). `causal` masks keys after the query.
class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(int64_t dim, int64_t heads);
  /// q_in [B,Tq,D], kv_in [B,Tk,D] -> [B,Tq,D].
  torch::Tensor forward(const torch::Tensor& q_in, const torch::Tensor& kv_in, bool causal);

 private:
  int64_t heads_;
  torch::nn::Linear q_{nullptr}, kv_{nullptr}, out_{nullptr};
};
TORCH_MODULE(Attention);

/// Pre-LN transformer block: x += SelfAttn(LN(x)); [x += CrossAttn(LN(x), memory)]; x +=
/// MLP(LN(x)).
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(int64_t dim, int64_t heads, int64_t mlp_ratio, bool causal, bool cross);
  /// x [B,T,D]; memory [B,M,D] (only for cross blocks, else undefined) -> [B,T,D].
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& memory = {});

 private:
  bool causal_, cross_;
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr}, ln3_{nullptr};
  Attention self_attn_{nullptr}, cross_attn_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(Block);

struct CocaOutput {
  torch::Tensor image_embed;  // [B,E] L2-normalised
  torch::Tensor text_embed;   // [B,E] L2-normalised
  torch::Tensor logits;       // [B,L,V] next-token logits from the fusion decoder
  torch::Tensor logit_scale;  // [] exp(learnable log-temperature), clamped to <= 100
};

class CocaImpl : public torch::nn::Module {
 public:
  explicit CocaImpl(const ModelConfig& config);
  /// images [B,3,H,W] float (normalised), tokens [B,L] int64, lengths [B] int64 (>= 1).
  CocaOutput forward(const torch::Tensor& images, const torch::Tensor& tokens,
                     const torch::Tensor& lengths);
  /// exp(learnable log-temperature) clamped to <= 100: [] float32 (what forward returns).
  torch::Tensor LogitScale();
  /// The pooled embeddings only (no decoder), the same values forward returns: [B,E] each.
  std::pair<torch::Tensor, torch::Tensor> Embed(const torch::Tensor& images,
                                                const torch::Tensor& tokens,
                                                const torch::Tensor& lengths);
  const ModelConfig& config() const { return config_; }

 private:
  torch::Tensor EncodeImage(const torch::Tensor& images);                        // [B,N+1,D]
  torch::Tensor EncodeText(const torch::Tensor& tokens);                         // [B,L,D]
  torch::Tensor PoolText(const torch::Tensor& h, const torch::Tensor& lengths);  // [B,D]

  ModelConfig config_;
  torch::nn::Conv2d patchify_{nullptr};
  torch::Tensor image_pos_, cls_, log_scale_;
  torch::nn::ModuleList image_blocks_{nullptr}, text_blocks_{nullptr}, fusion_blocks_{nullptr};
  torch::nn::LayerNorm image_ln_{nullptr}, text_ln_{nullptr}, fusion_ln_{nullptr};
  torch::nn::Embedding token_emb_{nullptr};
  torch::Tensor text_pos_;
  torch::nn::Linear image_proj_{nullptr}, text_proj_{nullptr};
};
TORCH_MODULE(Coca);

/// Symmetric InfoNCE (CLIP; CoCa eq. 1): mean of image->text and text->image cross-entropy
/// over the B x B similarity matrix scaled by `logit_scale`. Inputs [B,E] normalised -> [].
/// Negatives are the other B-1 items of this call's batch only.
torch::Tensor ContrastiveLoss(const torch::Tensor& image_embed, const torch::Tensor& text_embed,
                              const torch::Tensor& logit_scale);

/// Sum (not mean) of next-token cross-entropy: logits [B,L,V] at position t predict
/// tokens[:, t+1] for t + 1 < lengths. Returns the sum in float32 []; the caller divides by
/// the token count it chooses (over micro-batches and ranks). Count = sum(max(lengths-1, 0)).
torch::Tensor CaptionLossSum(const torch::Tensor& logits, const torch::Tensor& tokens,
                             const torch::Tensor& lengths);
/// Number of predicted tokens in a batch: sum over rows of max(length - 1, 0).
int64_t CaptionTokenCount(const torch::Tensor& lengths);

}  // namespace mm::train
