// bpe.h: byte-pair merging (Sennrich et al. 2016, "Neural Machine Translation of Rare Words
// with Subword Units"), the model step shared by CLIP's tokenizer and tokenizer.json's BPE.
//
// A word is a sequence of token ids; the merge of lowest rank among adjacent pairs is applied
// first, the leftmost occurrence first among equal ranks, until no adjacent pair has a merge.
// This is GPT-2's and CLIP's bpe() and Hugging Face tokenizers' Word::merge_all, done with a
// heap (O(n log n) in the word's length: a 64 KiB word of one letter does not take minutes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mm::pack {

/// The merges of a BPE model: (left id, right id) -> (rank, merged id). Immutable after the
/// Add calls; Apply is thread-safe.
class BpeMerges {
 public:
  /// Adds a merge of rank `rank`; a pair added again keeps the later rank and result, as a
  /// Python dict built from the merges list does.
  void Add(int32_t left, int32_t right, int32_t merged, int32_t rank);
  size_t size() const { return merges_.size(); }
  /// Merges `ids` (a word's initial symbols) in place.
  void Apply(std::vector<int32_t>* ids) const;

 private:
  static uint64_t Key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // -> (rank, merged)
};

}  // namespace mm::pack
