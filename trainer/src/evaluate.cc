#include "evaluate.h"

#include <cmath>
#include <unordered_set>

#include "data.h"

namespace mm::train {

namespace {

/// recall@1,5,10 of rows of `sim` [N,N] whose match is on the diagonal: the fraction of rows
/// where fewer than k items score above the match.
void Recall(const torch::Tensor& sim, double* out) {
  auto diag = sim.diagonal().unsqueeze(1);  // [N,1]
  auto rank = (sim > diag).sum(1);          // items scored above the match
  const int ks[3] = {1, 5, 10};
  for (int i = 0; i < 3; ++i) out[i] = (rank < ks[i]).to(torch::kDouble).mean().item<double>();
}

}  // namespace

EvalResult Evaluate(Coca& model, const std::shared_ptr<reader::ShardSet>& set,
                    const EvalOptions& options, AmpMode amp, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  reader::LoaderOptions lo;
  lo.batch_size = static_cast<int>(std::min<int64_t>(options.batch_size, set->num_samples()));
  lo.shuffle = false;
  lo.seed = 1234;  // the val captions are fixed across evaluations and runs
  lo.drop_last = false;
  lo.num_threads = options.loader_threads;
  lo.prefetch_batches = 2;
  auto loader = Take(reader::Loader::Create(set, lo), "opening the val loader");
  std::unordered_set<int64_t> seen;
  std::vector<torch::Tensor> img_emb, txt_emb;
  double ce_sum = 0;
  int64_t tokens = 0;
  const int64_t limit = options.max_samples > 0 ? options.max_samples : set->num_samples();
  while (static_cast<int64_t>(seen.size()) < limit) {
    auto b = Take(loader->Next(), "reading a val batch");
    if (!b) break;
    auto d = ToDevice(*b, device, model->config().max_tokens);
    std::vector<int64_t> keep;
    for (int i = 0; i < b->size; ++i) {
      if (static_cast<int64_t>(seen.size()) >= limit) break;
      if (seen.insert(b->indices[i]).second) keep.push_back(i);
    }
    if (keep.empty()) continue;
    auto idx = torch::tensor(keep, torch::kLong).to(device);
    auto images = d.images.index_select(0, idx), toks = d.tokens.index_select(0, idx);
    auto lens = d.lengths.index_select(0, idx);
    AutocastScope autocast(amp, device);
    auto out = model->forward(images, toks, lens);
    ce_sum += CaptionLossSum(out.logits, toks, lens).item<double>();
    tokens += CaptionTokenCount(lens.cpu());
    img_emb.push_back(out.image_embed.cpu());
    txt_emb.push_back(out.text_embed.cpu());
  }
  EvalResult r;
  if (img_emb.empty()) return r;
  r.caption_loss = ce_sum / std::max<int64_t>(tokens, 1);
  r.perplexity = std::exp(r.caption_loss);
  auto im = torch::cat(img_emb), tx = torch::cat(txt_emb);
  r.n = im.size(0);
  auto sim = torch::matmul(im, tx.t());  // [N,N]: image i vs caption j; the match is j == i
  Recall(sim, r.i2t);
  Recall(sim.t(), r.t2i);
  return r;
}

}  // namespace mm::train
