#include "evaluate.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "data.h"

namespace mm::train {

namespace {

namespace F = torch::nn::functional;

/// Per-image results of the images one rank scored (rows in the order scored).
struct Scored {
  std::vector<torch::Tensor> index, ce, tokens, img, txt;  // [n] int64, [n] double, [n] double,
                                                           // [n,E] float, [n,E] float
  torch::Tensor Cat(const std::vector<torch::Tensor>& v, const torch::Tensor& empty) const {
    return v.empty() ? empty : torch::cat(v);
  }
};

/// Summed next-token cross-entropy of each row: logits [B,L,V], tokens [B,L] -> [B] double.
torch::Tensor CaptionLossPerRow(const torch::Tensor& logits, const torch::Tensor& tokens,
                                const torch::Tensor& lengths) {
  const int64_t b = tokens.size(0), l = tokens.size(1), v = logits.size(2);
  auto pred = logits.slice(1, 0, l - 1).to(torch::kFloat).reshape({-1, v});
  auto target = tokens.slice(1, 1, l);
  auto valid = torch::arange(l - 1, lengths.options()).unsqueeze(0) < (lengths - 1).unsqueeze(1);
  target = target.masked_fill(valid.logical_not(), -100).reshape({-1});
  auto ce = F::cross_entropy(
      pred, target, F::CrossEntropyFuncOptions().ignore_index(-100).reduction(torch::kNone));
  return ce.view({b, l - 1}).to(torch::kDouble).sum(1).cpu();
}

/// This rank's share of the set, scored.
Scored ScoreShare(Coca& model, const std::shared_ptr<reader::ShardSet>& set,
                  const EvalOptions& options, AmpMode amp, const torch::Device& device,
                  const Distributed& dist) {
  reader::LoaderOptions lo;
  const int64_t per_rank = (set->num_samples() + dist.world_size() - 1) / dist.world_size();
  lo.batch_size = static_cast<int>(std::min<int64_t>(options.batch_size, per_rank));
  lo.shuffle = false;
  lo.seed = 1234;  // the val captions are fixed across evaluations and runs
  lo.rank = dist.rank();
  lo.world_size = dist.world_size();
  lo.drop_last = false;
  lo.even_batches = false;  // exact: every val image once over all ranks, no padding
  lo.num_threads = options.loader_threads;
  lo.prefetch_batches = 2;
  lo.crop = options.crop;
  auto loader = Take(reader::Loader::Create(set, lo), "opening the val loader");
  const int64_t limit = options.max_samples > 0 ? options.max_samples : set->num_samples();
  Scored s;
  while (auto b = Take(loader->Next(), "reading a val batch")) {
    if (b->indices.front() >= limit) break;  // file order: the rest lies past the limit too
    auto d = ToDevice(*b, device, model->config().max_tokens);
    AutocastScope autocast(amp, device);
    auto out = model->forward(d.images, d.tokens, d.lengths);
    s.index.push_back(torch::tensor(b->indices, torch::kLong));
    s.ce.push_back(CaptionLossPerRow(out.logits, d.tokens, d.lengths));
    s.tokens.push_back((d.lengths.cpu() - 1).clamp_min(0).to(torch::kDouble));
    s.img.push_back(out.image_embed.cpu());
    s.txt.push_back(out.text_embed.cpu());
  }
  return s;
}

/// Every rank's rows of `t` ([n_r, ...], n_r may differ), concatenated in rank order.
torch::Tensor GatherRows(const torch::Tensor& t, Distributed& dist) {
  auto n = torch::zeros({dist.world_size()}, torch::kLong);
  n[dist.rank()] = t.size(0);
  dist.AllReduceSum(n);
  const int64_t most = n.max().item<int64_t>();
  auto sizes = t.sizes().vec();
  sizes[0] = most - t.size(0);
  auto padded = torch::cat({t, torch::zeros(sizes, t.options())});
  std::vector<torch::Tensor> rows;
  auto parts = dist.AllGather(padded);
  for (int r = 0; r < dist.world_size(); ++r)
    rows.push_back(parts[r].slice(0, 0, n[r].item<int64_t>()));
  return torch::cat(rows);
}

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
                    const EvalOptions& options, AmpMode amp, const torch::Device& device,
                    Distributed& dist) {
  torch::NoGradGuard no_grad;
  const Scored s = ScoreShare(model, set, options, amp, device, dist);
  const int64_t e = model->config().embed_dim;
  auto index = GatherRows(s.Cat(s.index, torch::zeros({0}, torch::kLong)), dist);
  auto ce = GatherRows(s.Cat(s.ce, torch::zeros({0}, torch::kDouble)), dist);
  auto tokens = GatherRows(s.Cat(s.tokens, torch::zeros({0}, torch::kDouble)), dist);
  auto img = GatherRows(s.Cat(s.img, torch::zeros({0, e})), dist);
  auto txt = GatherRows(s.Cat(s.txt, torch::zeros({0, e})), dist);
  // Sorted by sample index, only those below the limit. No image comes twice (even_batches
  // false): a repeat would weigh its loss and recall twice, so it is an error, not dropped.
  const int64_t limit = options.max_samples > 0 ? options.max_samples : set->num_samples();
  auto order = std::get<1>(index.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
  std::vector<int64_t> keep;
  int64_t last = -1;
  for (int64_t i = 0; i < order.size(0); ++i) {
    const int64_t row = order[i].item<int64_t>(), sample = index[row].item<int64_t>();
    if (sample == last) {
      throw std::runtime_error("evaluation: val sample " + std::to_string(sample) +
                               " was scored twice (the val loader padded its last batch)");
    }
    if (sample < limit) keep.push_back(row);
    last = sample;
  }
  EvalResult r;
  r.scored = index.size(0);
  if (keep.empty()) return r;
  auto rows = torch::tensor(keep, torch::kLong);
  r.caption_loss = ce.index_select(0, rows).sum().item<double>() /
                   std::max(1.0, tokens.index_select(0, rows).sum().item<double>());
  r.perplexity = std::exp(r.caption_loss);
  auto im = img.index_select(0, rows), tx = txt.index_select(0, rows);
  r.n = im.size(0);
  auto sim = torch::matmul(im, tx.t());  // [N,N]: image i vs caption j; the match is j == i
  Recall(sim, r.i2t);
  Recall(sim.t(), r.t2i);
  return r;
}

}  // namespace mm::train
