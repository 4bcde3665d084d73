// keys.h: sample keys (private to ingest/). A key is unique in the set (FORMAT.md; `mmpack
// verify` rejects a repeated key); each format derives it from the image's name, these rules
// settle collisions.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ingest/ingest.h"
#include "ingest/sample_list.h"
#include "ingest/spill.h"

namespace mm::pack {

/// `path` without its extension ("a/b.jpg" -> "a/b"); a dot file or a dot in a folder name is
/// not an extension.
std::string StripExtension(const std::string& path);

/// Keys: the image path as given without its extension; the full path where that collides
/// (another sample's path has the same stem). On a list on disk, through external sorts in its
/// folder: `*samples` replaced by the same samples with their keys. Errors: IOError, Corruption.
[[nodiscard]] Status AssignKeysByStem(std::unique_ptr<SampleList>* samples);

/// Cuts each caption of `captions` longer than `max_bytes` (>= 0) to max_bytes + 1 bytes
/// (FieldNames::max_caption_bytes).
void CapCaptions(std::vector<std::string>* captions, int64_t max_bytes);

/// Makes keys unique within the set: the first sample with a key keeps it, a later one gets
/// "<key>#<n>" with the smallest n >= 2 that no sample uses. Deterministic (input order only).
/// The formats' own key rules should already give unique keys; this catches what they cannot
/// (e.g. "a.jpg.png" vs "a.jpg" + "a.png", or two tars with the same stem in a multi-tar input).
/// `*samples` is replaced by a list with the new keys when any key repeats. Memory: external
/// sorts (spill.h) in the list's folder, plus the repeated keys themselves.
/// Errors: IOError, Corruption (the spill files).
[[nodiscard]] Status MakeKeysUnique(std::unique_ptr<SampleList>* samples);

/// Gives every sample whose key another sample shares the key `rekey(sample)` (wds.cc: a key
/// repeated across tars is prefixed with its tar's name), through external sorts in the list's
/// folder; `*samples` is replaced by a list with the new keys when any key repeats.
/// Errors: IOError, Corruption (the spill files).
[[nodiscard]] Status RekeyRepeated(std::unique_ptr<SampleList>* samples,
                                   const std::function<std::string(const RawSample&)>& rekey);

/// The memory each external sort of the ingest may fill before it spills a run: small, so that
/// a build's peak memory does not depend on its manifest's length, large enough that
/// most manifests never spill. MM_SORT_MEMORY (bytes) overrides it, for the tests.
size_t SortMemoryBytes();

/// Groups (image, caption) pairs by image, first-appearance order, captions in pair order
/// (the JSONL and CSV/TSV manifests), with keys assigned by AssignKeysByStem's rule. Image paths
/// resolve against `base`, a folder or a URL (ResolveImagePath, image_url.h). Bounded memory
/// however far apart the lines of one image are: lines go through an external sort by (image,
/// line), groups through one by first line, stems through one by stem (spill.h, in `spill_dir`).
class Grouper {
 public:
  /// Captions over `max_caption_bytes` (-1: no cap) are cut as FieldNames says.
  Grouper(std::string base, const std::filesystem::path& spill_dir, int64_t max_caption_bytes);
  /// One line or row: its captions, and `fields` (kept when it is the image's first).
  [[nodiscard]] Status Add(const std::string& image, std::vector<std::string> captions,
                           std::vector<FieldValue> fields);
  /// The samples, finished, keys assigned (AssignKeysByStem). Errors: IOError, Corruption.
  [[nodiscard]] Result<std::unique_ptr<SampleList>> Take();

 private:
  std::string base_;
  std::filesystem::path spill_dir_;
  ExternalSorter lines_;
  int64_t max_caption_bytes_;
  uint64_t line_ = 0;
  RawSample scratch_sample_;
  std::string scratch_;
};

}  // namespace mm::pack
