// evaluate.h: validation: captioning loss and perplexity, and image<->text retrieval
// recall@1/5/10 over the val set (one caption per image, the loader's seeded choice).
#pragma once

#include <torch/torch.h>

#include <memory>

#include "amp.h"
#include "mm/reader.h"
#include "model.h"

namespace mm::train {

struct EvalResult {
  double caption_loss = 0;  // mean next-token cross-entropy per predicted token, nats
  double perplexity = 0;    // exp(caption_loss)
  int64_t n = 0;            // val images scored
  double i2t[3] = {0, 0, 0}, t2i[3] = {0, 0, 0};  // recall@1,5,10: fraction in [0, 1]
};

struct EvalOptions {
  int batch_size = 32;      // val batch (capped at the set's size)
  int loader_threads = 2;   // reader decode threads
  int64_t max_samples = 0;  // score at most this many val images (0: all)
};

/// Scores `model` on `set` without gradients. Every rank evaluates the whole set (so no rank
/// waits on a collective meanwhile); they get identical results. Throws on reader errors.
EvalResult Evaluate(Coca& model, const std::shared_ptr<reader::ShardSet>& set,
                    const EvalOptions& options, AmpMode amp, const torch::Device& device);

}  // namespace mm::train
