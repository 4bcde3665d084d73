// epoch_order.cc: see epoch_order.h.
#include "epoch_order.h"

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include "sampler.h"

namespace mm::reader::internal {
namespace {

// Salts keep the seeded draws of the order independent of each other and of sampler.h's.
constexpr uint64_t kVisitSalt = 0x626c6f636b000000ull;   // "block": the visits' permutation
constexpr uint64_t kWindowSalt = 0x77696e646f770000ull;  // "window": items within a window
constexpr uint64_t kShardsSalt = 0x7368617264730000ull;  // "shards": a set's remainder shards
constexpr uint64_t kSubsetSalt = 0x7375627365740000ull;  // "subset": items of a cut visit

uint64_t Key(uint64_t seed, uint64_t salt, uint64_t what) {
  return Mix64(Mix64(seed ^ salt) ^ what);
}

}  // namespace

int64_t EpochItems(const OrderShape& shape) {
  if (shape.epoch_size > 0) return shape.epoch_size;
  return std::accumulate(shape.shard_items.begin(), shape.shard_items.end(), int64_t{0});
}

std::vector<int64_t> PartQuotas(const OrderShape& shape) {
  const int64_t total = EpochItems(shape);
  double weights = 0;
  for (const auto& p : shape.parts) weights += p.weight;
  std::vector<int64_t> quota(shape.parts.size(), 0);
  std::vector<double> fraction(shape.parts.size(), 0);
  int64_t given = 0;
  for (size_t i = 0; i < shape.parts.size(); ++i) {
    const double exact =
        weights > 0 ? static_cast<double>(total) * shape.parts[i].weight / weights : 0.0;
    quota[i] = static_cast<int64_t>(exact);
    fraction[i] = exact - static_cast<double>(quota[i]);
    given += quota[i];
  }
  std::vector<size_t> by_fraction(shape.parts.size());
  std::iota(by_fraction.begin(), by_fraction.end(), size_t{0});
  std::stable_sort(by_fraction.begin(), by_fraction.end(),
                   [&](size_t a, size_t b) { return fraction[a] > fraction[b]; });
  for (size_t t = 0; given < total && !by_fraction.empty(); ++t, ++given) {
    ++quota[by_fraction[t % by_fraction.size()]];
  }
  return quota;
}

EpochOrder::EpochOrder(std::shared_ptr<const OrderShape> shape, Arrangement arrangement, int window,
                       uint64_t seed, int64_t epoch)
    : shape_(std::move(shape)),
      arrangement_(arrangement),
      window_(std::max(1, window)),
      seed_(seed),
      epoch_(epoch) {
  PlanVisits();
  if (arrangement_ == Arrangement::kBlock && visits_.size() > 1) {
    const Permutation p(visits_.size(), Key(seed_, kVisitSalt, 0), epoch_);
    std::vector<Visit> permuted(visits_.size());
    for (size_t v = 0; v < visits_.size(); ++v) permuted[v] = visits_[p(v)];
    visits_.swap(permuted);
  }
  first_.assign(1, 0);
  for (const Visit& v : visits_) first_.push_back(first_.back() + v.count);
  size_ = first_.back();
}

// The visits in plan order (see epoch_order.h). A single set: each shard once, whole.
void EpochOrder::PlanVisits() {
  const OrderShape& s = *shape_;
  if (!s.mixture) {
    for (size_t k = 0; k < s.shard_items.size(); ++k) {
      if (s.shard_items[k] > 0) visits_.push_back({static_cast<uint32_t>(k), 0, s.shard_items[k]});
    }
    return;
  }
  const std::vector<int64_t> quota = PartQuotas(s);
  for (size_t i = 0; i < s.parts.size(); ++i) {
    const OrderShape::Part& part = s.parts[i];
    int64_t items = 0;
    for (size_t k = part.first_shard; k < part.end_shard; ++k) items += s.shard_items[k];
    if (items == 0) continue;  // ShardSet::Open refuses a weighted set without items
    const int64_t passes = quota[i] / items;
    int64_t rest = quota[i] % items;
    for (int64_t pass = 0; pass < passes; ++pass) {
      for (size_t k = part.first_shard; k < part.end_shard; ++k) {
        if (s.shard_items[k] > 0) {
          visits_.push_back(
              {static_cast<uint32_t>(k), static_cast<int32_t>(pass), s.shard_items[k]});
        }
      }
    }
    const size_t shards = part.end_shard - part.first_shard;
    const Permutation order(shards, Key(seed_, kShardsSalt, i), epoch_);
    for (size_t t = 0; t < shards && rest > 0; ++t) {
      const size_t k = part.first_shard + order(t);
      const int64_t take = std::min(s.shard_items[k], rest);
      if (take > 0)
        visits_.push_back({static_cast<uint32_t>(k), static_cast<int32_t>(passes), take});
      rest -= take;
    }
  }
}

Draw EpochOrder::InVisit(size_t v, int64_t j) const {
  const Visit& visit = visits_[v];
  const int64_t items = shape_->shard_items[visit.shard];
  int64_t local = j;
  if (visit.count < items) {  // a seeded subset of the shard's items
    const uint64_t what = (uint64_t{visit.shard} << 32) ^ static_cast<uint32_t>(visit.pass);
    local = static_cast<int64_t>(Permutation(items, Key(seed_, kSubsetSalt, what), epoch_)(j));
  }
  return Draw{visit.shard, visit.pass, local};
}

Draw EpochOrder::At(int64_t pos) const {
  int64_t slot = pos;
  if (arrangement_ == Arrangement::kGlobal) {
    slot = static_cast<int64_t>(Permutation(size_, seed_, epoch_)(pos));
  } else if (arrangement_ == Arrangement::kBlock) {
    // The window holding pos: visits [w*W, (w+1)*W), items [first_[w*W], first_[(w+1)*W]).
    const size_t windows = (visits_.size() + window_ - 1) / window_;
    size_t lo = 0, hi = windows;  // invariant: start(lo) <= pos < start(hi)
    auto start = [&](size_t w) { return first_[std::min(visits_.size(), w * window_)]; };
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      (start(mid) <= pos ? lo : hi) = mid;
    }
    const int64_t begin = start(lo), n = start(lo + 1) - begin;
    slot = begin +
           static_cast<int64_t>(Permutation(n, Key(seed_, kWindowSalt, lo), epoch_)(pos - begin));
  }
  // The last visit whose first item is <= slot (empty visits do not exist).
  const size_t v =
      static_cast<size_t>(std::upper_bound(first_.begin(), first_.end(), slot) - first_.begin()) -
      1;
  return InVisit(v, slot - first_[v]);
}

std::vector<OrderWindow> EpochOrder::Windows() const {
  const size_t per = arrangement_ == Arrangement::kGlobal  ? std::max<size_t>(1, visits_.size())
                     : arrangement_ == Arrangement::kBlock ? static_cast<size_t>(window_)
                                                           : 1;
  std::vector<OrderWindow> out;
  for (size_t b = 0; b < visits_.size(); b += per) {
    const size_t e = std::min(visits_.size(), b + per);
    OrderWindow w;
    w.begin = first_[b];
    w.end = first_[e];
    std::unordered_set<uint32_t> seen;
    for (size_t v = b; v < e; ++v) {
      if (seen.insert(visits_[v].shard).second) w.shards.push_back(visits_[v].shard);
    }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace mm::reader::internal
