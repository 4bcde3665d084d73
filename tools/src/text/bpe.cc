// bpe.cc: see bpe.h.
#include "text/bpe.h"

#include <queue>
#include <tuple>

namespace mm::pack {

void BpeMerges::Add(int32_t left, int32_t right, int32_t merged, int32_t rank) {
  merges_[Key(left, right)] = {rank, merged};
}

void BpeMerges::Apply(std::vector<int32_t>* ids) const {
  std::vector<int32_t>& w = *ids;
  const int n = static_cast<int>(w.size());
  if (n < 2) return;
  // Symbols as a linked list over positions; a merged symbol lives at its left position.
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  using Candidate = std::tuple<int32_t, int, int32_t>;  // rank, position, merged id
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int i) {
    if (i < 0 || next[i] < 0) return;
    auto it = merges_.find(Key(w[i], w[next[i]]));
    if (it != merges_.end()) heap.emplace(it->second.first, i, it->second.second);
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const auto [rank, i, merged] = heap.top();
    heap.pop();
    if (!alive[i] || next[i] < 0) continue;
    auto it = merges_.find(Key(w[i], w[next[i]]));
    if (it == merges_.end() || it->second.first != rank || it->second.second != merged) continue;
    const int j = next[i];
    w[i] = merged;
    alive[j] = false;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  int out = 0;
  for (int i = 0; i >= 0 && i < n; i = next[i]) w[out++] = w[i];
  w.resize(out);
}

}  // namespace mm::pack
