// epoch_order.cc: see epoch_order.h.
#include "order/epoch_order.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_set>

#include "order/sampler.h"

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
  const size_t n = shape.parts.size();
  std::vector<int64_t> quota(n, 0);
  if (n == 0 || total <= 0) return quota;
  double weights = 0, largest = 0;
  for (const auto& p : shape.parts) {
    weights += p.weight;
    largest = std::max(largest, p.weight);
  }
  if (!(largest > 0)) return quota;
  // Each share in [0, total]. Weights whose sum or product with the epoch size would overflow
  // (A:1e308,B:1) are taken relative to the largest first; otherwise exactly as always (a
  // state saved before keeps its order).
  const bool overflows = !std::isfinite(weights) || !std::isfinite(double(total) * largest);
  std::vector<long double> exact(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const double w = shape.parts[i].weight;
    if (!overflows) {
      exact[i] = static_cast<double>(total) * w / weights;
    } else {
      long double relative_sum = 0;
      for (const auto& p : shape.parts)
        relative_sum += static_cast<long double>(p.weight) / largest;
      exact[i] =
          static_cast<long double>(total) * (static_cast<long double>(w) / largest) / relative_sum;
    }
  }
  std::vector<long double> fraction(n, 0);
  int64_t given = 0;
  for (size_t i = 0; i < n; ++i) {
    const long double e = std::min<long double>(std::max<long double>(exact[i], 0), total);
    quota[i] = std::min<int64_t>(static_cast<int64_t>(std::floor(e)), total - given);
    fraction[i] = e - static_cast<long double>(quota[i]);
    given += quota[i];
  }
  // The rest (fewer than n items: each floor is within one of its share) one by one to the
  // largest fractional parts, ties to the earlier part; computed, never counted out one by one.
  std::vector<size_t> by_fraction(n);
  std::iota(by_fraction.begin(), by_fraction.end(), size_t{0});
  std::stable_sort(by_fraction.begin(), by_fraction.end(),
                   [&](size_t a, size_t b) { return fraction[a] > fraction[b]; });
  const int64_t rest = total - given;
  const int64_t each = rest / static_cast<int64_t>(n), extra = rest % static_cast<int64_t>(n);
  for (size_t t = 0; t < n; ++t) {
    quota[by_fraction[t]] += each + (static_cast<int64_t>(t) < extra ? 1 : 0);
  }
  return quota;
}

int64_t PlannedVisits(const OrderShape& shape) {
  if (!shape.mixture) {
    return std::count_if(shape.shard_items.begin(), shape.shard_items.end(),
                         [](int64_t n) { return n > 0; });
  }
  const std::vector<int64_t> quota = PartQuotas(shape);
  int64_t visits = 0;
  for (size_t i = 0; i < shape.parts.size(); ++i) {
    const OrderShape::Part& part = shape.parts[i];
    int64_t items = 0, shards = 0;
    for (size_t k = part.first_shard; k < part.end_shard; ++k) {
      items += shape.shard_items[k];
      shards += shape.shard_items[k] > 0 ? 1 : 0;
    }
    if (items == 0) continue;
    const int64_t passes = quota[i] / items;
    if (shards > 0 && passes > (kMaxEpochVisits + 1 - visits) / shards) return kMaxEpochVisits + 1;
    visits += passes * shards + (quota[i] % items > 0 ? std::min(shards, quota[i] % items) : 0);
    if (visits > kMaxEpochVisits) return kMaxEpochVisits + 1;
  }
  return visits;
}

Status CheckOrderSize(const OrderShape& shape) {
  const int64_t visits = PlannedVisits(shape);
  if (visits <= kMaxEpochVisits) return Status::OK();
  return Status::InvalidArgument(
      "an epoch of " + std::to_string(EpochItems(shape)) + " items reads its sets' shards over " +
      std::string(visits > kMaxEpochVisits ? "more than " : "") + std::to_string(kMaxEpochVisits) +
      " times (upsampling by weight or epoch_size): at most " + std::to_string(kMaxEpochVisits) +
      " shard visits an epoch; lower epoch_size or the weights' spread");
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
