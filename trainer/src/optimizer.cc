#include "optimizer.h"

#include <cmath>

namespace mm::train {

std::unique_ptr<torch::optim::AdamW> MakeAdamW(torch::nn::Module& model, double lr,
                                               double weight_decay) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& np : model.named_parameters()) {
    const auto& name = np.key();
    const bool nd = np.value().dim() < 2 || name.find("pos") != std::string::npos ||
                    name.find("cls") != std::string::npos;
    (nd ? no_decay : decay).push_back(np.value());
  }
  torch::optim::AdamWOptions ao(lr);
  ao.betas({0.9, 0.98}).eps(1e-6).weight_decay(weight_decay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(ao));
  auto nd_opts = std::make_unique<torch::optim::AdamWOptions>(ao);
  nd_opts->weight_decay(0.0);
  groups.emplace_back(no_decay, std::move(nd_opts));
  return std::make_unique<torch::optim::AdamW>(std::move(groups), ao);
}

double LearningRate(double lr, int64_t step, int64_t total, int64_t warmup) {
  if (step < warmup) return lr * static_cast<double>(step + 1) / warmup;
  const double span = std::max<int64_t>(1, total - warmup);
  const double progress = std::min(1.0, static_cast<double>(step - warmup) / span);
  return lr * 0.5 * (1.0 + std::cos(M_PI * progress));
}

}  // namespace mm::train
