#include "contrastive.h"

#include "model.h"

namespace mm::train {

namespace {

namespace F = torch::nn::functional;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// All-gather forward, all-reduce + own slice backward. The process group travels as an
/// integer (an autograd context saves IValues only); it outlives every step's graph.
class AllGatherFunction : public torch::autograd::Function<AllGatherFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t dist) {
    ctx->saved_data["dist"] = dist;
    ctx->saved_data["rows"] = x.size(0);
    return torch::cat(reinterpret_cast<Distributed*>(dist)->AllGather(x.contiguous()));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* dist = reinterpret_cast<Distributed*>(ctx->saved_data["dist"].toInt());
    const int64_t rows = ctx->saved_data["rows"].toInt();
    // Every rank's loss depends on these rows: their gradient is the sum over ranks.
    torch::Tensor g = grads[0].contiguous().clone();
    dist->AllReduceSum(g);
    const int64_t r = dist->rank();
    return {g.slice(0, r * rows, (r + 1) * rows), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor AllGatherWithGrad(const torch::Tensor& x, Distributed& dist) {
  if (!dist.enabled()) return x;
  return AllGatherFunction::apply(x, reinterpret_cast<int64_t>(&dist));
}

torch::Tensor GlobalContrastiveLoss(const torch::Tensor& local_img, const torch::Tensor& local_txt,
                                    const torch::Tensor& all_img, const torch::Tensor& all_txt,
                                    const torch::Tensor& logit_scale, int rank, bool local_loss) {
  if (!local_loss) return ContrastiveLoss(all_img, all_txt, logit_scale);  // [N,N]
  const int64_t b = local_img.size(0);
  auto labels = torch::arange(rank * b, (rank + 1) * b,
                              torch::dtype(torch::kLong).device(local_img.device()));
  auto i2t = logit_scale * torch::matmul(local_img, all_txt.t());  // [B,N]
  auto t2i = logit_scale * torch::matmul(local_txt, all_img.t());  // [B,N]
  return 0.5 * (F::cross_entropy(i2t, labels) + F::cross_entropy(t2i, labels));
}

}  // namespace mm::train
