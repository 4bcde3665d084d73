// evaluate.h: validation: captioning loss and perplexity, and image<->text retrieval
// recall@1/5/10 over the val set (one caption per image, the loader's seeded choice).
#pragma once

#include <torch/torch.h>

#include <memory>

#include "amp.h"
#include "distributed.h"
#include "mm/reader.h"
#include "model.h"

namespace mm::train {

struct EvalResult {
  double caption_loss = 0;  // mean next-token cross-entropy per predicted token, nats
  double perplexity = 0;    // exp(caption_loss)
  int64_t n = 0;            // val images scored: distinct images, the recall's denominator N
  // Rows the ranks scored, all ranks together: n, plus the rows of a batch that reaches past
  // EvalOptions::max_samples (scored, then left out). Each image is scored once (the reader's
  // even_batches false): before it, padding made 51 val images 64 rows on 2 ranks of 8.
  int64_t scored = 0;
  double i2t[3] = {0, 0, 0}, t2i[3] = {0, 0, 0};  // recall@1,5,10: fraction in [0, 1]
};

struct EvalOptions {
  int batch_size = 32;      // val batch per rank (capped at the set's size)
  int loader_threads = 0;   // reader decode threads (0: one per CPU available)
  int64_t max_samples = 0;  // score the first this many val images in file order (0: all)
  reader::ImageCrop crop = reader::ImageCrop::kNone;  // kCenter under --augment rrc
};

/// Scores `model` on `set` without gradients, split across the ranks of `dist`: each rank
/// scores its share of the set in file order (the reader's split with drop_last false and
/// even_batches false: each image exactly once over all ranks, the last batches short, a rank
/// may get one batch fewer), then every rank gathers every rank's per-image results (caption
/// CE sum and token count, both embeddings, the sample index) and computes the metrics on the
/// whole set: images sorted by sample index, the caption loss summed in that order, recall@k
/// over the N distinct images (an [N, N] similarity). So every rank gets the same result, and
/// it equals a single process's up to float rounding of the forward pass at another batch
/// size. A collective: all ranks call it together. Throws on reader errors, and when an image
/// comes back twice (a reader that padded: the metrics would count it twice).
EvalResult Evaluate(Coca& model, const std::shared_ptr<reader::ShardSet>& set,
                    const EvalOptions& options, AmpMode amp, const torch::Device& device,
                    Distributed& dist);

}  // namespace mm::train
