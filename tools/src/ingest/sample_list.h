// sample_list.h: the input's samples on disk (a SpillFile, spill.h), read back in order, so that
// `mmpack build` holds a handful of samples at a time however long its manifest is.
// Private to tools/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ingest/ingest.h"
#include "ingest/spill.h"
#include "mm/status.h"

namespace mm::pack {

/// RawSample to bytes and back (every field; a private layout, never stored beyond the build).
void EncodeSample(const RawSample& s, std::string* out);
/// Errors: Corruption (bytes that EncodeSample did not write).
[[nodiscard]] Status DecodeSample(std::string_view bytes, RawSample* s);

/// Samples appended in order, then read in order from any position.
class SampleList {
 public:
  /// An empty list whose file lives in `dir`. Errors: those of SpillFile::Create.
  [[nodiscard]] static Result<std::unique_ptr<SampleList>> Create(const std::filesystem::path& dir);

  /// Appends a sample. Errors: IOError.
  [[nodiscard]] Status Add(const RawSample& s);
  /// Appends a sample already encoded by EncodeSample (a sort's payload), without decoding it.
  [[nodiscard]] Status AddEncoded(std::string_view bytes);
  /// Ends the appending (flushes); then cursors may read. Errors: IOError.
  [[nodiscard]] Status Finish();
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  const std::filesystem::path& dir() const { return dir_; }

  /// Reads samples [from, size()) in order.
  class Cursor {
   public:
    /// The next sample; false at the end. Errors: IOError, Corruption.
    [[nodiscard]] Result<bool> Next(RawSample* s);
    /// The position of the sample Next gives next.
    size_t position() const { return next_; }

   private:
    friend class SampleList;
    Cursor(SpillFile::Reader reader, size_t next, size_t end)
        : reader_(std::move(reader)), next_(next), end_(end) {}
    SpillFile::Reader reader_;
    size_t next_, end_;
    std::string record_;
  };
  /// A cursor at sample `from` (<= size()). Errors: IOError, Corruption.
  [[nodiscard]] Result<Cursor> From(size_t from) const;

 private:
  static constexpr size_t kIndexEvery = 4096;  // one file offset kept per this many samples
  SampleList(std::filesystem::path dir, std::unique_ptr<SpillFile> file)
      : dir_(std::move(dir)), file_(std::move(file)) {}
  std::filesystem::path dir_;
  std::unique_ptr<SpillFile> file_;
  size_t count_ = 0;
  std::vector<int64_t> offsets_;  // of samples 0, kIndexEvery, 2 * kIndexEvery, ...
  std::string scratch_;
};

/// Calls `fn(position, sample)` for every sample of `list` in order; stops at its first error.
[[nodiscard]] Status ForEachSample(const SampleList& list,
                                   const std::function<Status(uint64_t at, RawSample& s)>& fn);

}  // namespace mm::pack
