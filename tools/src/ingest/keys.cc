// keys.cc: see keys.h.
#include "ingest/keys.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "ingest/common.h"
#include "ingest/image_url.h"

namespace mm::pack {

std::string StripExtension(const std::string& path) {
  size_t slash = path.find_last_of('/');
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path;
  if (dot == (slash == std::string::npos ? 0 : slash + 1)) return path;  // ".hidden"
  return path.substr(0, dot);
}

size_t SortMemoryBytes() {
  if (const char* v = std::getenv("MM_SORT_MEMORY")) {
    const long long n = std::atoll(v);
    if (n > 0) return static_cast<size_t>(n);
  }
  return size_t{4} << 20;
}

namespace {

// Every sample's `group_of(sample)` with its position, sorted: one group's samples are
// neighbours, in position order.
Status SortPositionsBy(const SampleList& in,
                       const std::function<std::string(const RawSample&)>& group_of,
                       ExternalSorter* out) {
  MM_RETURN_NOT_OK(ForEachSample(
      in, [&](uint64_t at, RawSample& s) { return out->Add(TextKey(group_of(s), at), {}); }));
  return out->Finish();
}

// Gives every sample the key `key_of(sample, shared)`, `shared` telling whether another sample
// has the same `group_of`: the groups through one external sort, the positions of the shared
// ones through another, then one pass that rewrites the list. With `only_if_shared` the list is
// kept as it is when no group is shared.
Status RekeyByGroup(std::unique_ptr<SampleList>* samples,
                    const std::function<std::string(const RawSample&)>& group_of,
                    const std::function<std::string(const RawSample&, bool shared)>& key_of,
                    bool only_if_shared) {
  SampleList& in = **samples;
  ExternalSorter groups(in.dir(), SortMemoryBytes());
  MM_RETURN_NOT_OK(SortPositionsBy(in, group_of, &groups));
  ExternalSorter shared(in.dir(), SortMemoryBytes());  // positions, in order
  {
    std::string key, payload, last;
    uint64_t last_at = 0;
    int64_t count = 0;
    for (;;) {
      MM_ASSIGN_OR_RETURN(bool more, groups.Next(&key, &payload));
      if (!more) break;
      const std::string group = TextOf(key);
      if (count > 0 && group == last) {
        if (count == 1) MM_RETURN_NOT_OK(shared.Add(Be64(last_at), {}));
        MM_RETURN_NOT_OK(shared.Add(Be64(NumberOf(key)), {}));
        ++count;
        continue;
      }
      last.assign(group);
      last_at = NumberOf(key);
      count = 1;
    }
  }
  if (only_if_shared && shared.size() == 0) return Status::OK();
  MM_RETURN_NOT_OK(shared.Finish());
  MM_ASSIGN_OR_RETURN(std::unique_ptr<SampleList> out, SampleList::Create(in.dir()));
  std::string next, unused;
  MM_ASSIGN_OR_RETURN(bool have, shared.Next(&next, &unused));
  MM_RETURN_NOT_OK(ForEachSample(in, [&](uint64_t at, RawSample& s) -> Status {
    const bool is_shared = have && ReadBe64(next, 0) == at;
    if (is_shared) {
      MM_ASSIGN_OR_RETURN(have, shared.Next(&next, &unused));
    }
    s.key = key_of(s, is_shared);
    return out->Add(s);
  }));
  MM_RETURN_NOT_OK(out->Finish());
  *samples = std::move(out);
  return Status::OK();
}

}  // namespace

Status RekeyRepeated(std::unique_ptr<SampleList>* samples,
                     const std::function<std::string(const RawSample&)>& rekey) {
  return RekeyByGroup(
      samples, [](const RawSample& s) { return s.key; },
      [&rekey](const RawSample& s, bool shared) { return shared ? rekey(s) : s.key; },
      /*only_if_shared=*/true);
}

Status AssignKeysByStem(std::unique_ptr<SampleList>* samples) {
  return RekeyByGroup(
      samples, [](const RawSample& s) { return StripExtension(s.source); },
      [](const RawSample& s, bool shared) { return shared ? s.source : StripExtension(s.source); },
      /*only_if_shared=*/false);
}

Status MakeKeysUnique(std::unique_ptr<SampleList>* samples) {
  SampleList& in = **samples;
  const std::filesystem::path& dir = in.dir();
  // Keys sorted, each with its position: the first of equal keys keeps it.
  ExternalSorter by_key(dir, SortMemoryBytes());
  MM_RETURN_NOT_OK(SortPositionsBy(
      in, [](const RawSample& s) { return s.key; }, &by_key));
  struct Dup {
    uint64_t at;
    std::string key;
    int n = 2;
    std::string chosen;
  };
  std::vector<Dup> dups;
  MM_ASSIGN_OR_RETURN(std::unique_ptr<SpillFile> originals, SpillFile::Create(dir));  // sorted
  {
    std::string key, payload, last;
    bool first = true;
    for (;;) {
      MM_ASSIGN_OR_RETURN(bool more, by_key.Next(&key, &payload));
      if (!more) break;
      std::string k(TextOf(key));
      if (!first && k == last) {
        dups.push_back({NumberOf(key), std::move(k), 2, {}});
        continue;
      }
      MM_RETURN_NOT_OK(originals->Append(k).status());
      last = std::move(k);
      first = false;
    }
  }
  if (dups.empty()) return Status::OK();
  MM_RETURN_NOT_OK(originals->Close());
  std::sort(dups.begin(), dups.end(), [](const Dup& a, const Dup& b) { return a.at < b.at; });
  // "<key>#<n>" for each repeat in input order: the smallest n >= 2 that is neither an original
  // key nor already given. Candidates are checked against the sorted originals in rounds (a
  // merge join), 8 a repeat at a time; repeats are rare, so one round nearly always does.
  std::unordered_set<std::string> checked, in_originals, given;
  size_t next = 0;  // the first repeat without its key
  while (next < dups.size()) {
    std::vector<std::string> pending;
    for (size_t i = next; i < dups.size(); ++i) {
      for (int n = dups[i].n; n < dups[i].n + 8; ++n) {
        std::string c = dups[i].key + "#" + std::to_string(n);
        if (checked.count(c) == 0) pending.push_back(std::move(c));
      }
    }
    std::sort(pending.begin(), pending.end());
    pending.erase(std::unique(pending.begin(), pending.end()), pending.end());
    SpillFile::Reader r = originals->Read();
    std::string o;
    MM_ASSIGN_OR_RETURN(bool have, r.Next(&o));
    for (const std::string& c : pending) {
      while (have && o < c) {
        MM_ASSIGN_OR_RETURN(have, r.Next(&o));
      }
      if (have && o == c) in_originals.insert(c);
      checked.insert(c);
    }
    for (; next < dups.size(); ++next) {
      Dup& d = dups[next];
      bool unchecked = false;
      for (;; ++d.n) {
        std::string c = d.key + "#" + std::to_string(d.n);
        if (checked.count(c) == 0) {
          unchecked = true;
          break;
        }
        if (in_originals.count(c) == 0 && given.insert(c).second) {
          d.chosen = std::move(c);
          break;
        }
      }
      if (unchecked) break;
    }
  }
  std::unordered_map<uint64_t, std::string> renamed;
  for (Dup& d : dups) renamed.emplace(d.at, std::move(d.chosen));
  MM_ASSIGN_OR_RETURN(std::unique_ptr<SampleList> out, SampleList::Create(dir));
  MM_RETURN_NOT_OK(ForEachSample(in, [&](uint64_t at, RawSample& s) {
    if (auto it = renamed.find(at); it != renamed.end()) s.key = it->second;
    return out->Add(s);
  }));
  MM_RETURN_NOT_OK(out->Finish());
  *samples = std::move(out);
  return Status::OK();
}

void CapCaptions(std::vector<std::string>* captions, int64_t max_bytes) {
  if (max_bytes < 0) return;
  for (std::string& c : *captions) {
    // c.size() - 1 > max_bytes: no max_bytes + 1 that could overflow at INT64_MAX.
    if (!c.empty() && static_cast<uint64_t>(c.size() - 1) > static_cast<uint64_t>(max_bytes)) {
      c.resize(static_cast<size_t>(max_bytes) + 1);
      c.shrink_to_fit();
    }
  }
}

Grouper::Grouper(std::string base, const std::filesystem::path& spill_dir,
                 int64_t max_caption_bytes)
    : base_(std::move(base)),
      spill_dir_(spill_dir),
      lines_(spill_dir, SortMemoryBytes()),
      max_caption_bytes_(max_caption_bytes) {}

Status Grouper::Add(const std::string& image, std::vector<std::string> captions,
                    std::vector<FieldValue> fields) {
  CapCaptions(&captions, max_caption_bytes_);
  scratch_sample_.captions = std::move(captions);
  scratch_sample_.fields = std::move(fields);
  EncodeSample(scratch_sample_, &scratch_);
  return lines_.Add(TextKey(image, line_++), scratch_);
}

Result<std::unique_ptr<SampleList>> Grouper::Take() {
  MM_RETURN_NOT_OK(lines_.Finish());
  // Lines by (image, line): one image's lines are neighbours. Each image becomes a sample,
  // sorted again by its first line: first-appearance order.
  ExternalSorter groups(spill_dir_, SortMemoryBytes());
  {
    std::string key, payload, image;
    RawSample line, sample;
    uint64_t first = 0;
    bool open = false;
    auto close = [&]() -> Status {
      sample.source = image;
      sample.path = ResolveImagePath(base_, image).path;
      EncodeSample(sample, &scratch_);
      return groups.Add(Be64(first), scratch_);
    };
    for (;;) {
      MM_ASSIGN_OR_RETURN(bool more, lines_.Next(&key, &payload));
      if (!more) break;
      MM_RETURN_NOT_OK(DecodeSample(payload, &line));
      const std::string this_image = TextOf(key);
      if (!open || this_image != image) {
        if (open) MM_RETURN_NOT_OK(close());
        sample = RawSample();
        image.assign(this_image);
        first = NumberOf(key);
        sample.fields = std::move(line.fields);
        open = true;
      }
      for (std::string& c : line.captions) sample.captions.push_back(std::move(c));
    }
    if (open) MM_RETURN_NOT_OK(close());
  }
  MM_RETURN_NOT_OK(groups.Finish());
  MM_ASSIGN_OR_RETURN(std::unique_ptr<SampleList> out, SampleList::Create(spill_dir_));
  for (std::string key, payload;;) {
    MM_ASSIGN_OR_RETURN(bool more, groups.Next(&key, &payload));
    if (!more) break;
    MM_RETURN_NOT_OK(out->AddEncoded(payload));
  }
  MM_RETURN_NOT_OK(out->Finish());
  MM_RETURN_NOT_OK(AssignKeysByStem(&out));
  return out;
}

}  // namespace mm::pack
