// shard_set.cc: ShardSet::Open for a directory, a remote set or a mixture, and the per-sample
// accessors (see shard_set_impl.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "mm/internal/checksum.h"
#include "mm/internal/index_json.h"
#include "mm/internal/mixture.h"
#include "mm/internal/set_path.h"
#include "mm/internal/set_rules.h"
#include "remote/http.h"
#include "remote/remote_shards.h"
#include "set/order.h"
#include "set/shard_set_impl.h"

namespace mm::reader {

Result<std::shared_ptr<ShardSet>> ShardSet::Open(const std::string& location,
                                                 const OpenOptions& options) {
  MM_ASSIGN_OR_RETURN(std::unique_ptr<const internal::ShardSetImpl> impl,
                      internal::ShardSetImpl::Open(location, options));
  return std::shared_ptr<ShardSet>(new ShardSet(std::move(impl)));
}

ShardSet::ShardSet(std::unique_ptr<const internal::ShardSetImpl> impl) : impl_(std::move(impl)) {}
ShardSet::~ShardSet() = default;

const SetInfo& ShardSet::info() const { return impl_->info(); }
const std::vector<MixtureSet>& ShardSet::sets() const { return impl_->sets(); }
bool ShardSet::remote() const { return impl_->remote(); }
size_t ShardSet::ShardOfSample(int64_t i) const { return impl_->ShardOfSample(i); }
Result<ShardPin> ShardSet::PinShard(size_t k) const { return impl_->PinShard(k); }
CacheStats ShardSet::cache_stats() const { return impl_->cache_stats(); }
int ShardSet::NumCaptions(int64_t i) const { return impl_->NumCaptions(i); }
Span<const int32_t> ShardSet::Tokens(int64_t i, int c) const { return impl_->Tokens(i, c); }
std::string_view ShardSet::Key(int64_t i) const { return impl_->Key(i); }
std::string ShardSet::Locate(int64_t i) const { return impl_->Locate(i); }
int64_t ShardSet::StoredImageBytes(int64_t i) const { return impl_->StoredImageBytes(i); }
void ShardSet::ImageSize(int64_t i, int* width, int* height) const {
  impl_->ImageSize(i, width, height);
}
Status ShardSet::CheckIntact(int64_t i) const { return impl_->CheckIntact(i); }
Status ShardSet::ReadImage(int64_t i, uint8_t* dst) const { return impl_->ReadImage(i, dst); }

int ShardSet::SetOfSample(int64_t i) const {
  const std::vector<MixtureSet>& s = sets();
  // The last set whose first sample is <= i (a set without samples is skipped).
  size_t lo = 0;
  for (size_t p = 1; p < s.size(); ++p) {
    if (s[p].first_sample <= i && s[p].info.num_samples > 0) lo = p;
  }
  return static_cast<int>(lo);
}

namespace internal {
namespace {

constexpr int64_t kMaxRemoteIndexBytes = int64_t{256} << 20;

// The sets of a mixture must give the model the same token ids: one line naming the
// difference. Their stored image sizes may differ: what the Loader hands out is checked by
// Loader::Create (CheckOutputShape), where an output size makes every batch one shape.
Status CheckCompatible(const ShardSetImpl::Part& first, const ShardSetImpl::Part& other) {
  const SetInfo &a = first.info, &b = other.info;
  const std::string names = other.location.text + " and " + first.location.text;
  if (a.channels != b.channels) {
    return Status::InvalidArgument("mixture: " + names + " differ in channels (" +
                                   std::to_string(b.channels) + " vs " +
                                   std::to_string(a.channels) + ")");
  }
  if (a.tokenizer_sha256 != b.tokenizer_sha256 || a.vocab_size != b.vocab_size ||
      a.pad_id != b.pad_id) {
    return Status::InvalidArgument(
        "mixture: " + names + " were tokenized differently (tokenizer sha256 " +
        b.tokenizer_sha256.substr(0, 12) + " vs " + a.tokenizer_sha256.substr(0, 12) +
        "): the sets of a mixture must share the tokenizer");
  }
  return Status::OK();
}

}  // namespace

// One line per shard of every part, each part's weight, the epoch size: what the epoch order
// and the items it names are made of (not where the files live).
std::string ShardSetImpl::Identity(const ShardSetImpl& set) {
  std::string text = "mmpack order identity 1\n";
  char line[160];
  for (const Part& p : set.parts_) {
    std::snprintf(line, sizeof line, "set weight %.17g shards %zu\n", p.weight,
                  p.info.shards.size());
    text += line;
    for (const ShardEntry& e : p.info.shards) {
      text += e.file;
      std::snprintf(line, sizeof line, " %lld %lld %lld %lld ", static_cast<long long>(e.samples),
                    static_cast<long long>(e.captions), static_cast<long long>(e.tokens),
                    static_cast<long long>(e.bytes));
      text += line + e.xxh3_64 + "\n";
    }
  }
  text += "weighted " + std::to_string(set.weighted_) + " epoch_size " +
          std::to_string(set.epoch_size_) + "\n";
  return Xxh3Hex(text.data(), text.size());
}

Result<ShardSetImpl::Part> ShardSetImpl::OpenPart(const std::string& location,
                                                  const OpenOptions& options,
                                                  std::vector<std::unique_ptr<Shard>>* opened) {
  Part part;
  MM_ASSIGN_OR_RETURN(part.location, ParseLocation(location));
  if (!part.location.remote()) {
    MM_ASSIGN_OR_RETURN(std::string text, ReadIndexText(location));  // never blocks on a FIFO
    MM_ASSIGN_OR_RETURN(IndexDocument index, DecodeIndex(text, location));
    MM_RETURN_NOT_OK(CheckSetRules(index));
    part.info = std::move(index.info);
    for (const ShardEntry& e : part.info.shards) {
      MM_RETURN_NOT_OK(CheckSetPath(location, e.file));  // no symlink out of the set
      MM_ASSIGN_OR_RETURN(auto shard, Shard::Open(location + "/" + e.file, e, part.info, options));
      opened->push_back(std::move(shard));
    }
    return part;
  }
  MM_ASSIGN_OR_RETURN(const HttpRequest request,
                      RequestFor(part.location, std::string(mm::format::kIndexFile)));
  MM_ASSIGN_OR_RETURN(std::string text,
                      ThreadHttpClient().GetText(request, options.remote, kMaxRemoteIndexBytes));
  MM_ASSIGN_OR_RETURN(IndexDocument index, DecodeIndex(text, part.location.text));
  MM_RETURN_NOT_OK(CheckSetRules(index).WithContext(part.location.text));
  part.info = std::move(index.info);
  MM_ASSIGN_OR_RETURN(part.remote, RemoteShards::Create(part.location, part.info, options));
  return part;
}

Status ShardSetImpl::AddPart(Part part, std::vector<std::unique_ptr<Shard>> opened) {
  part.first_shard = refs_.size();
  for (size_t k = 0; k < part.info.shards.size(); ++k) {
    const ShardEntry& e = part.info.shards[k];
    ShardRef ref;
    if (part.remote) {
      ref.remote = part.remote.get();
      ref.remote_index = k;
      remote_ = true;
    } else {
      ref.local = opened[k].get();
      local_shards_.push_back(std::move(opened[k]));
    }
    refs_.push_back(ref);
    first_sample_.push_back(first_sample_.back() + e.samples);
    first_caption_.push_back(first_caption_.back() + e.captions);
  }
  part.end_shard = refs_.size();
  parts_.push_back(std::move(part));
  return Status::OK();
}

Result<std::unique_ptr<const ShardSetImpl>> ShardSetImpl::Open(const std::string& location,
                                                               const OpenOptions& options) {
  MM_ASSIGN_OR_RETURN(std::optional<MixtureSpec> mixture, ParseMixture(location));
  std::unique_ptr<ShardSetImpl> set(new ShardSetImpl());
  set->first_sample_.push_back(0);
  set->first_caption_.push_back(0);
  const std::vector<MixtureSpec::Set> single = {{location, 0}};
  const auto& sets = mixture ? mixture->sets : single;
  for (const MixtureSpec::Set& s : sets) {
    std::vector<std::unique_ptr<Shard>> opened;
    MM_ASSIGN_OR_RETURN(Part part, OpenPart(s.location, options, &opened));
    if (!set->parts_.empty()) MM_RETURN_NOT_OK(CheckCompatible(set->parts_[0], part));
    if (s.weight > 0 && part.info.num_samples == 0) {
      return Status::InvalidArgument("mixture: " + part.location.text +
                                     " has no samples but a weight");
    }
    part.weight = s.weight;
    MM_RETURN_NOT_OK(set->AddPart(std::move(part), std::move(opened)));
  }
  set->info_ = set->parts_[0].info;
  if (mixture) {
    set->weighted_ = mixture->weighted;
    set->epoch_size_ = mixture->epoch_size;
    set->info_.root = location;
    set->info_.shards.clear();
    set->info_.num_samples = set->info_.num_captions = 0;
    for (const Part& p : set->parts_) {
      for (ShardEntry e : p.info.shards) {
        e.file = p.location.Display(e.file);  // unique across the sets
        set->info_.shards.push_back(std::move(e));
      }
      set->info_.num_samples += p.info.num_samples;
      set->info_.num_captions += p.info.num_captions;
    }
  }
  if (set->remote_) set->cache_limit_ = options.remote.cache_limit;
  set->identity_ = Identity(*set);
  set->DescribeSets();
  return std::unique_ptr<const ShardSetImpl>(std::move(set));
}

// sets_: each part's location, weight, first sample, index.json and its share of an epoch under
// kRandomCaption (the order's quotas, epoch_order.h).
void ShardSetImpl::DescribeSets() {
  const auto shape = MakeOrderShape(*this, CaptionMode::kRandomCaption);
  const std::vector<int64_t> quota = PartQuotas(*shape);
  for (size_t p = 0; p < parts_.size(); ++p) {
    MixtureSet s;
    s.location = parts_[p].location.text;
    s.weight = parts_[p].weight;
    s.first_sample = first_sample_[parts_[p].first_shard];
    s.epoch_samples = shape->mixture ? quota[p] : parts_[p].info.num_samples;
    s.info = parts_[p].info;
    sets_.push_back(std::move(s));
  }
}

int ShardSetImpl::PartOfOtherImageSize() const {
  for (size_t p = 1; p < parts_.size(); ++p) {
    if (parts_[p].info.image_width != parts_[0].info.image_width ||
        parts_[p].info.image_height != parts_[0].info.image_height) {
      return static_cast<int>(p);
    }
  }
  return -1;
}

size_t ShardSetImpl::ShardOfSample(int64_t i) const {
  // Last shard whose first sample is <= i (empty shards are skipped by upper_bound).
  auto it = std::upper_bound(first_sample_.begin(), first_sample_.end(), i);
  return static_cast<size_t>(it - first_sample_.begin()) - 1;
}

const Shard* ShardSetImpl::Resident(size_t k) const {
  const ShardRef& r = refs_[k];
  return r.local ? r.local : r.remote->Resident(r.remote_index);
}

const RemoteOptions* ShardSetImpl::remote_options() const {
  for (const Part& p : parts_) {
    if (p.remote) return &p.remote->options();
  }
  return nullptr;
}

std::shared_ptr<CacheDir> ShardSetImpl::cache_dir() const {
  for (const Part& p : parts_) {
    if (p.remote) return p.remote->cache();
  }
  return nullptr;
}

void ShardSetImpl::NotPinned(size_t k, int64_t i) const {
  std::fprintf(stderr,
               "mm::reader: sample %lld of %s was read while its shard was not pinned "
               "(ShardSet::PinShard; see mm/reader.h)\n",
               static_cast<long long>(i), info_.shards[k].file.c_str());
  std::abort();
}

const Shard& ShardSetImpl::ShardOf(int64_t i, int64_t* local) const {
  const size_t k = ShardOfSample(i);
  *local = i - first_sample_[k];
  const Shard* s = Resident(k);
  if (!s) NotPinned(k, i);
  return *s;
}

const Shard& ShardSetImpl::shard(size_t k) const {
  const Shard* s = Resident(k);
  if (!s) NotPinned(k, first_sample_[k]);
  return *s;
}

Result<ShardPin> ShardSetImpl::PinShard(size_t k) const {
  if (k >= refs_.size()) {
    return Status::OutOfRange("shard " + std::to_string(k) + " of " + std::to_string(refs_.size()));
  }
  if (!refs_[k].remote) return ShardPin();
  return refs_[k].remote->Pin(refs_[k].remote_index);
}

CacheStats ShardSetImpl::cache_stats() const {
  CacheStats total;
  for (const Part& p : parts_) {
    if (!p.remote) continue;
    const CacheStats s = p.remote->stats();
    total.downloads += s.downloads;
    total.downloaded_bytes += s.downloaded_bytes;
    total.hits += s.hits;
    total.evictions += s.evictions;
    total.peak_bytes = std::max(total.peak_bytes, s.peak_bytes);
  }
  return total;
}

std::string ShardSetImpl::LocalPath(size_t k) const {
  const ShardRef& r = refs_[k];
  if (r.remote) return r.remote->CachedPath(r.remote_index);
  for (const Part& p : parts_) {
    if (k >= p.first_shard && k < p.end_shard) {
      return p.location.text + "/" + p.info.shards[k - p.first_shard].file;
    }
  }
  return "";
}

int ShardSetImpl::NumCaptions(int64_t i) const {
  int64_t local = 0;
  return ShardOf(i, &local).NumCaptions(local);
}

Span<const int32_t> ShardSetImpl::Tokens(int64_t i, int c) const {
  int64_t local = 0;
  const Shard& s = ShardOf(i, &local);
  return s.CaptionTokens(s.CaptionBegin(local) + c);
}

std::string_view ShardSetImpl::Key(int64_t i) const {
  int64_t local = 0;
  return ShardOf(i, &local).Key(local);
}

std::string ShardSetImpl::Locate(int64_t i) const {
  if (i < 0 || i >= info_.num_samples) return "sample " + std::to_string(i) + " (out of range)";
  const size_t k = ShardOfSample(i);
  return info_.shards[k].file + " sample " + std::to_string(i - first_sample_[k]);
}

int64_t ShardSetImpl::StoredImageBytes(int64_t i) const {
  int64_t local = 0;
  return ShardOf(i, &local).StoredBytes(local);
}

void ShardSetImpl::ImageSize(int64_t i, int* width, int* height) const {
  int64_t local = 0;
  ShardOf(i, &local).ImageSize(local, width, height);
}

Status ShardSetImpl::CheckIntact(int64_t i) const {
  int64_t local = 0;
  return ShardOf(i, &local).CheckIntact();
}

Status ShardSetImpl::ReadImage(int64_t i, uint8_t* dst) const {
  if (i < 0 || i >= info_.num_samples) {
    return Status::OutOfRange("sample " + std::to_string(i) + " of " +
                              std::to_string(info_.num_samples));
  }
  int64_t local = 0;
  return ShardOf(i, &local).ReadImage(local, dst);
}

}  // namespace internal
}  // namespace mm::reader
