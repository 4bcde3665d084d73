// keys.cc: see keys.h.
#include "ingest/keys.h"

#include <unordered_set>
#include <utility>

#include "ingest/common.h"

namespace mm::pack {

std::string StripExtension(const std::string& path) {
  size_t slash = path.find_last_of('/');
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path;
  if (dot == (slash == std::string::npos ? 0 : slash + 1)) return path;  // ".hidden"
  return path.substr(0, dot);
}

void AssignKeys(std::vector<RawSample>* samples) {
  std::unordered_map<std::string, int> count;
  for (const RawSample& s : *samples) ++count[StripExtension(s.source)];
  for (RawSample& s : *samples) {
    std::string k = StripExtension(s.source);
    s.key = count[k] > 1 ? s.source : k;
  }
}

void MakeKeysUnique(std::vector<RawSample>* samples) {
  std::unordered_set<std::string> original;
  for (const RawSample& s : *samples) original.insert(s.key);
  std::unordered_set<std::string> used;
  for (RawSample& s : *samples) {
    if (used.insert(s.key).second) continue;
    for (int n = 2;; ++n) {
      std::string candidate = s.key + "#" + std::to_string(n);
      if (original.count(candidate) == 0 && used.insert(candidate).second) {
        s.key = std::move(candidate);
        break;
      }
    }
  }
}

void Grouper::Add(const std::string& image, std::string caption) {
  auto [it, inserted] = index_.emplace(image, samples_.size());
  if (inserted) {
    RawSample s;
    s.source = image;
    s.path = Resolve(base_, image);
    samples_.push_back(std::move(s));
  }
  samples_[it->second].captions.push_back(std::move(caption));
}

void Grouper::Add(const std::string& image, std::vector<std::string> captions,
                  std::vector<FieldValue> fields) {
  auto [it, inserted] = index_.emplace(image, samples_.size());
  if (inserted) {
    RawSample s;
    s.source = image;
    s.path = Resolve(base_, image);
    s.fields = std::move(fields);
    samples_.push_back(std::move(s));
  }
  auto& to = samples_[it->second].captions;
  for (std::string& c : captions) to.push_back(std::move(c));
}

std::vector<RawSample> Grouper::Take() {
  AssignKeys(&samples_);
  return std::move(samples_);
}

}  // namespace mm::pack
