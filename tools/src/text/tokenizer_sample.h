// tokenizer_sample.h: the captions a trained tokenizer learns from, at most N of them, so that
// training memory stays flat with the set's size (`mmpack build --tokenizer-sample N`).
//
// Reservoir sampling, Vitter's Algorithm R (Vitter 1985, "Random Sampling with a Reservoir",
// ACM TOMS 11(1)): caption i (0-based) of the stream is kept while fewer than N are held, else
// it replaces held caption j when j = draw(i + 1) < N. The draws come from SplitMix64 (Steele,
// Lea & Flood 2014) seeded with a constant, and j is taken by Lemire's unbiased bounded draw,
// so the sample depends only on the caption stream (the samples' order, which no thread count
// changes): the same input gives the same tokenizer, byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mm::pack {

/// `mmpack build`'s default --tokenizer-sample: 20,000 captions. SentencePiece's unigram trainer
/// takes about 1.1 KB of memory a short caption (a 300,000-line build peaked at 98.5 MB with
/// 30,000 sampled captions, 87.6 MB with 20,000, against 75.1 MB for 10,000 lines: 1.31x and
/// 1.17x), so the default keeps a trained tokenizer's build within 1.3 times the memory of a
/// 10,000-caption build whatever the set's size. 20,000 captions hold some 200,000 words,
/// enough for an 8,000-piece vocabulary of caption text; pass a larger N for a larger
/// vocabulary or more varied text.
inline constexpr int64_t kDefaultTokenizerSample = 20000;

/// Holds the sample. Not thread-safe: one stream, one caller.
class CaptionReservoir {
 public:
  /// Keeps at most `capacity` (>= 1) captions; `seed` fixes the draws.
  explicit CaptionReservoir(int64_t capacity, uint64_t seed = 0x6d6d7061636bULL);

  /// Offers the next caption of the stream.
  void Add(std::string caption);
  /// Captions offered so far.
  int64_t seen() const { return seen_; }
  /// The kept captions, in stream order; the reservoir is empty afterwards.
  std::vector<std::string> Take();

 private:
  uint64_t Next();  // SplitMix64
  int64_t capacity_;
  uint64_t state_;
  int64_t seen_ = 0;
  std::vector<std::pair<int64_t, std::string>> kept_;  // (position in the stream, caption)
};

}  // namespace mm::pack
