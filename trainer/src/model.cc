#include "model.h"

#include <cmath>

namespace mm::train {

namespace F = torch::nn::functional;

AttentionImpl::AttentionImpl(int64_t dim, int64_t heads) : heads_(heads) {
  TORCH_CHECK(dim % heads == 0, "--dim ", dim, " is not a multiple of --heads ", heads);
  q_ = register_module("q", torch::nn::Linear(dim, dim));
  kv_ = register_module("kv", torch::nn::Linear(dim, 2 * dim));
  out_ = register_module("out", torch::nn::Linear(dim, dim));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& q_in, const torch::Tensor& kv_in,
                                     bool causal) {
  const int64_t b = q_in.size(0), tq = q_in.size(1), tk = kv_in.size(1), d = q_in.size(2);
  const int64_t hd = d / heads_;
  auto q = q_(q_in).view({b, tq, heads_, hd}).transpose(1, 2);                 // [B,h,Tq,hd]
  auto kv = kv_(kv_in).view({b, tk, 2, heads_, hd}).permute({2, 0, 3, 1, 4});  // [2,B,h,Tk,hd]
  auto k = kv[0], v = kv[1];
  auto scores = torch::matmul(q, k.transpose(-2, -1)).to(torch::kFloat) /
                std::sqrt(static_cast<double>(hd));  // [B,h,Tq,Tk]
  if (causal) {
    auto mask = torch::ones({tq, tk}, torch::dtype(torch::kBool).device(q_in.device())).triu(1);
    scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  }
  auto attn = scores.softmax(-1).to(v.scalar_type());
  auto out = torch::matmul(attn, v).transpose(1, 2).reshape({b, tq, d});  // [B,Tq,D]
  return out_(out);
}

BlockImpl::BlockImpl(int64_t dim, int64_t heads, int64_t mlp_ratio, bool causal, bool cross)
    : causal_(causal), cross_(cross) {
  ln1_ = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  self_attn_ = register_module("self_attn", Attention(dim, heads));
  if (cross_) {
    ln2_ = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    cross_attn_ = register_module("cross_attn", Attention(dim, heads));
  }
  ln3_ = register_module("ln3", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  fc1_ = register_module("fc1", torch::nn::Linear(dim, mlp_ratio * dim));
  fc2_ = register_module("fc2", torch::nn::Linear(mlp_ratio * dim, dim));
}

torch::Tensor BlockImpl::forward(torch::Tensor x, const torch::Tensor& memory) {
  auto h = ln1_(x);
  x = x + self_attn_(h, h, causal_);
  if (cross_) x = x + cross_attn_(ln2_(x), memory, /*causal=*/false);
  x = x + fc2_(F::gelu(fc1_(ln3_(x))));
  return x;
}

CocaImpl::CocaImpl(const ModelConfig& c) : config_(c) {
  TORCH_CHECK(c.vocab_size > 0, "vocab_size must be positive");
  TORCH_CHECK(c.image_size % c.patch == 0, "--patch ", c.patch, " does not divide the image size ",
              c.image_size);
  const int64_t grid = c.image_size / c.patch;
  patchify_ = register_module("patchify",
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(/*in_channels=*/3, c.dim,
                                                                         /*kernel_size=*/c.patch)
                                                    .stride(c.patch)));
  image_pos_ = register_parameter("image_pos", torch::randn({1, grid * grid, c.dim}) * 0.02);
  cls_ = register_parameter("cls", torch::randn({1, 1, c.dim}) * 0.02);
  image_blocks_ = register_module("image_blocks", torch::nn::ModuleList());
  text_blocks_ = register_module("text_blocks", torch::nn::ModuleList());
  fusion_blocks_ = register_module("fusion_blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.layers; ++i) {
    image_blocks_->push_back(Block(c.dim, c.heads, c.mlp_ratio, /*causal=*/false, /*cross=*/false));
    text_blocks_->push_back(Block(c.dim, c.heads, c.mlp_ratio, /*causal=*/true, /*cross=*/false));
    fusion_blocks_->push_back(Block(c.dim, c.heads, c.mlp_ratio, /*causal=*/true, /*cross=*/true));
  }
  auto ln = [&] { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.dim})); };
  image_ln_ = register_module("image_ln", ln());
  text_ln_ = register_module("text_ln", ln());
  fusion_ln_ = register_module("fusion_ln", ln());
  token_emb_ = register_module("token_emb", torch::nn::Embedding(c.vocab_size, c.dim));
  {
    torch::NoGradGuard no_grad;
    token_emb_->weight.normal_(0.0, 0.02);
  }
  text_pos_ = register_parameter("text_pos", torch::randn({1, c.max_tokens, c.dim}) * 0.02);
  image_proj_ = register_module(
      "image_proj", torch::nn::Linear(torch::nn::LinearOptions(c.dim, c.embed_dim).bias(false)));
  text_proj_ = register_module(
      "text_proj", torch::nn::Linear(torch::nn::LinearOptions(c.dim, c.embed_dim).bias(false)));
  log_scale_ = register_parameter("log_scale", torch::full({}, std::log(1.0 / 0.07)));
}

torch::Tensor CocaImpl::EncodeImage(const torch::Tensor& images) {
  auto x = patchify_(images).flatten(2).transpose(1, 2) + image_pos_;           // [B,N,D]
  x = torch::cat({cls_.expand({x.size(0), 1, -1}).to(x.scalar_type()), x}, 1);  // [B,N+1,D]
  for (auto& m : *image_blocks_) x = m->as<Block>()->forward(x);
  return image_ln_(x);
}

torch::Tensor CocaImpl::EncodeText(const torch::Tensor& tokens) {
  const int64_t l = tokens.size(1);
  TORCH_CHECK(l <= config_.max_tokens, "caption of ", l, " tokens exceeds max_tokens ",
              config_.max_tokens);
  auto x = token_emb_(tokens) + text_pos_.slice(1, 0, l);  // [B,L,D]
  for (auto& m : *text_blocks_) x = m->as<Block>()->forward(x);
  return text_ln_(x);
}

torch::Tensor CocaImpl::PoolText(const torch::Tensor& h, const torch::Tensor& lengths) {
  auto rows = torch::arange(h.size(0), lengths.options());
  return h.index({rows, (lengths - 1).clamp_min(0)});  // [B,D]
}

CocaOutput CocaImpl::forward(const torch::Tensor& images, const torch::Tensor& tokens,
                             const torch::Tensor& lengths) {
  auto img = EncodeImage(images);  // [B,N+1,D]
  auto txt = EncodeText(tokens);   // [B,L,D]
  CocaOutput out;
  out.image_embed = F::normalize(image_proj_(img.select(1, 0)).to(torch::kFloat),
                                 F::NormalizeFuncOptions().dim(-1));
  out.text_embed = F::normalize(text_proj_(PoolText(txt, lengths)).to(torch::kFloat),
                                F::NormalizeFuncOptions().dim(-1));
  auto x = txt;
  for (auto& m : *fusion_blocks_) x = m->as<Block>()->forward(x, img);
  out.logits = F::linear(fusion_ln_(x), token_emb_->weight);  // [B,L,V], tied LM head
  out.logit_scale = LogitScale();
  return out;
}

torch::Tensor CocaImpl::LogitScale() { return log_scale_.clamp_max(std::log(100.0)).exp(); }

std::pair<torch::Tensor, torch::Tensor> CocaImpl::Embed(const torch::Tensor& images,
                                                        const torch::Tensor& tokens,
                                                        const torch::Tensor& lengths) {
  auto img = EncodeImage(images);
  auto txt = EncodeText(tokens);
  return {F::normalize(image_proj_(img.select(1, 0)).to(torch::kFloat),
                       F::NormalizeFuncOptions().dim(-1)),
          F::normalize(text_proj_(PoolText(txt, lengths)).to(torch::kFloat),
                       F::NormalizeFuncOptions().dim(-1))};
}

torch::Tensor ContrastiveLoss(const torch::Tensor& image_embed, const torch::Tensor& text_embed,
                              const torch::Tensor& logit_scale) {
  auto logits = logit_scale * torch::matmul(image_embed, text_embed.t());  // [B,B]
  auto labels = torch::arange(logits.size(0), torch::dtype(torch::kLong).device(logits.device()));
  return 0.5 * (F::cross_entropy(logits, labels) + F::cross_entropy(logits.t(), labels));
}

torch::Tensor CaptionLossSum(const torch::Tensor& logits, const torch::Tensor& tokens,
                             const torch::Tensor& lengths) {
  const int64_t l = tokens.size(1), v = logits.size(2);
  auto pred = logits.slice(1, 0, l - 1).to(torch::kFloat);          // [B,L-1,V]
  auto target = tokens.slice(1, 1, l);                              // [B,L-1]
  auto pos = torch::arange(l - 1, lengths.options()).unsqueeze(0);  // [1,L-1]
  auto valid = pos < (lengths - 1).unsqueeze(1);                    // [B,L-1]
  target = target.masked_fill(valid.logical_not(), -100);
  return F::cross_entropy(pred.reshape({-1, v}), target.reshape({-1}),
                          F::CrossEntropyFuncOptions().ignore_index(-100).reduction(torch::kSum));
}

int64_t CaptionTokenCount(const torch::Tensor& lengths) {
  return (lengths - 1).clamp_min(0).sum().item<int64_t>();
}

}  // namespace mm::train
