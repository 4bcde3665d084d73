#include "data.h"

#include <nlohmann/json.hpp>

#include "mm/internal/checksum.h"
#include "model.h"

namespace mm::train {

namespace {

// CLIP's image normalisation (Radford et al. 2021), RGB.
constexpr double kMean[3] = {0.48145466, 0.4578275, 0.40821073};
constexpr double kStd[3] = {0.26862954, 0.26130258, 0.27577711};

}  // namespace

void ThrowIfError(const Status& st, const std::string& what) {
  if (!st.ok()) throw std::runtime_error(what + ": " + st.ToString());
}

std::string SetIdentity(const reader::SetInfo& info) {
  std::string shards;
  for (const auto& e : info.shards) {
    shards += e.file + "\t" + std::to_string(e.samples) + "\t" + e.xxh3_64 + "\n";
  }
  return nlohmann::json({{"tokenizer_sha256", info.tokenizer_sha256},
                         {"vocab_size", info.vocab_size},
                         {"samples", info.num_samples},
                         {"shards_xxh3_64", Xxh3Hex(shards.data(), shards.size())}})
      .dump();
}

std::string DescribeSet(const std::string& identity) {
  const auto j = nlohmann::json::parse(identity, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return "(no identity recorded)";
  return std::to_string(j.value("samples", int64_t{0})) + " samples, shards XXH3-64 " +
         j.value("shards_xxh3_64", std::string("?")) + ", tokenizer SHA-256 " +
         j.value("tokenizer_sha256", std::string("?")).substr(0, 12) + "...";
}

HostBatch ToHost(const reader::Batch& b, int64_t max_tokens, bool pinned) {
  HostBatch h;
  auto img = torch::from_blob(const_cast<uint8_t*>(b.images.data()), {b.size, b.height, b.width, 3},
                              torch::kUInt8);
  h.images = pinned ? img.pin_memory() : img.clone();
  const int64_t l = std::max<int64_t>(std::min<int64_t>(b.max_length, max_tokens), 1);
  auto tok =
      torch::from_blob(const_cast<int32_t*>(b.tokens.data()), {b.size, b.max_length}, torch::kInt);
  h.tokens = tok.slice(1, 0, l).to(torch::kLong);
  auto len = torch::from_blob(const_cast<int32_t*>(b.lengths.data()), {b.size}, torch::kInt);
  h.lengths = len.to(torch::kLong).clamp(1, l);
  if (pinned) {
    h.tokens = h.tokens.pin_memory();
    h.lengths = h.lengths.pin_memory();
  }
  h.indices = b.indices;
  h.caption_tokens = CaptionTokenCount(h.lengths);
  return h;
}

DeviceBatch ToDevice(const HostBatch& h, const torch::Device& device, bool non_blocking) {
  DeviceBatch d;
  auto img = h.images.to(device, non_blocking).permute({0, 3, 1, 2});
  auto opts = torch::TensorOptions().dtype(torch::kFloat).device(device);
  auto mean = torch::tensor({kMean[0], kMean[1], kMean[2]}, opts).view({1, 3, 1, 1});
  auto stdv = torch::tensor({kStd[0], kStd[1], kStd[2]}, opts).view({1, 3, 1, 1});
  d.images = ((img.to(torch::kFloat) / 255.0 - mean) / stdv).contiguous();
  d.tokens = h.tokens.to(device, non_blocking);
  d.lengths = h.lengths.to(device, non_blocking);
  d.indices = h.indices;
  d.caption_tokens = h.caption_tokens;
  return d;
}

DeviceBatch ToDevice(const reader::Batch& b, const torch::Device& device, int64_t max_tokens) {
  return ToDevice(ToHost(b, max_tokens, /*pinned=*/false), device, /*non_blocking=*/false);
}

reader::BatchPtr BatchStream::Next(double* wait_s) {
  auto t0 = Clock::now();
  auto b = Take(loader_->Next(), "reading a training batch");
  if (!b) {
    loader_->StartEpoch(++epoch_);
    b = Take(loader_->Next(), "reading a training batch");
    if (!b) throw std::runtime_error("the training set yields no batch in an epoch");
  }
  epoch_ = b->epoch;
  *wait_s += Seconds(t0, Clock::now());
  return b;
}

int64_t BatchStream::Restore(const std::string& json, bool same_set) {
  auto st = Take(reader::LoaderState::FromJson(json), "checkpoint loader state");
  if (same_set) {
    ThrowIfError(loader_->Restore(st), "restoring the loader");
  } else {
    loader_->StartEpoch(st.epoch);
  }
  epoch_ = st.epoch;
  return epoch_;
}

}  // namespace mm::train
