// keys.h: sample keys (private to ingest/). A key is unique in the set (FORMAT.md; `mmpack
// verify` rejects a repeated key); each format derives it from the image's name, these rules
// settle collisions.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "ingest/ingest.h"

namespace mm::pack {

/// `path` without its extension ("a/b.jpg" -> "a/b"); a dot file or a dot in a folder name is
/// not an extension.
std::string StripExtension(const std::string& path);

/// Keys: the image path as given without its extension; the full path where that collides.
void AssignKeys(std::vector<RawSample>* samples);

/// Makes keys unique within the set: the first sample with a key keeps it, a later one gets
/// "<key>#<n>" with the smallest n >= 2 that no sample uses. Deterministic (input order only).
/// The formats' own key rules should already give unique keys; this catches what they cannot
/// (e.g. "a.jpg.png" vs "a.jpg" + "a.png", or two tars with the same stem in a multi-tar input).
void MakeKeysUnique(std::vector<RawSample>* samples);

/// Groups (image, caption) pairs by image, first-appearance order, captions in pair order
/// (the JSONL and CSV/TSV manifests). Image paths resolve against `base`.
class Grouper {
 public:
  explicit Grouper(std::filesystem::path base) : base_(std::move(base)) {}
  void Add(const std::string& image, std::string caption);
  /// Several captions of one line or row; `fields` kept when the image is new.
  void Add(const std::string& image, std::vector<std::string> captions,
           std::vector<FieldValue> fields);
  /// The samples, with keys assigned (AssignKeys).
  std::vector<RawSample> Take();

 private:
  std::filesystem::path base_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<RawSample> samples_;
};

}  // namespace mm::pack
