// spill.h: records kept on disk instead of in memory, so that `mmpack build`'s memory does not
// grow with its input (a 100M-line manifest builds in the memory of a small one). Private to
// tools/.
//
//   SpillFile       an unnamed temporary file (O_TMPFILE, else a name removed at once: nothing
//                   is left behind by a crash or a kill) of length-prefixed records, written
//                   through a buffer and read back in order from any record's offset.
//   ExternalSorter  records sorted by a byte-string key with bounded memory: sorted runs of at
//                   most `memory_bytes` are spilled, then merged (a k-way merge over a heap).
//                   Records with equal keys come out in the order they were added, so every
//                   result is deterministic.
//
// Both live in one folder, the build's output folder's parent, which must hold the set anyway:
// /tmp may be a RAM disk, and spilling there would move the memory, not save it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mm/internal/file.h"
#include "mm/status.h"

namespace mm::pack {

/// A new unnamed file in `dir` (OpenUnnamedFile, mm/internal/file.h). Errors: IOError naming
/// `dir`.
[[nodiscard]] Result<UniqueFd> OpenSpillFile(const std::filesystem::path& dir);

/// An unnamed temporary file of records ([uint32 size][bytes], at most 1 GiB each).
class SpillFile {
 public:
  /// A new empty file in `dir`. Errors: IOError (the folder is not writable).
  [[nodiscard]] static Result<std::unique_ptr<SpillFile>> Create(const std::filesystem::path& dir);

  /// Appends one record; returns its offset (for Reader). Errors: IOError (a full disk).
  [[nodiscard]] Result<int64_t> Append(std::string_view record);
  /// Writes what the buffer holds. Readers see records only after it.
  [[nodiscard]] Status Flush();
  /// Flush, then gives the write buffer's memory back: for a file that is written no more (a
  /// sorted run, a finished list), so that many of them cost no memory while they wait.
  [[nodiscard]] Status Close();
  /// Bytes appended so far (the offset the next record gets).
  int64_t size() const { return written_ + static_cast<int64_t>(buffer_.size()); }

  /// Reads records in order from `offset` (a record's start), through its own buffer.
  class Reader {
   public:
    /// The next record into `record`; false at the end. Errors: IOError, Corruption (a size
    /// past the end: the file was damaged under us).
    [[nodiscard]] Result<bool> Next(std::string* record);

   private:
    friend class SpillFile;
    Reader(int fd, int64_t offset, int64_t end, std::string what)
        : fd_(fd), pos_(offset), end_(end), what_(std::move(what)) {}
    Status Fill(size_t need);
    int fd_;
    int64_t pos_, end_;  // file offset of buffer_[at_] is pos_ - (buffer_.size() - at_)
    std::string what_;
    std::string buffer_;
    size_t at_ = 0;
  };
  /// A reader from `offset` to the last flushed record.
  Reader Read(int64_t offset = 0) const { return Reader(fd_.get(), offset, written_, What()); }

 private:
  SpillFile(UniqueFd fd, std::filesystem::path dir) : fd_(std::move(fd)), dir_(std::move(dir)) {}
  std::string What() const;  // names the file in errors
  UniqueFd fd_;
  std::filesystem::path dir_;
  int64_t written_ = 0;
  std::string buffer_;
};

/// Sort keys: `v` big-endian, so that bytewise order is numeric order.
std::string Be64(uint64_t v);
/// The number Be64 wrote at `at` of `s`.
uint64_t ReadBe64(std::string_view s, size_t at);
/// (text, n) as a sort key: the text with each NUL byte written as 00 FF, then 00 00, then n
/// (Be64). Prefix-free and order-keeping: keys order as (text, n) do with std::string's order of
/// the texts, and records of one text are neighbours in n order whatever bytes the texts hold.
std::string TextKey(std::string_view text, uint64_t n);
/// The text of a TextKey.
std::string TextOf(std::string_view key);
/// What orders the texts of TextKeys (the escaped text and its end): equal for one text only.
inline std::string_view TextOrderOf(std::string_view key) { return key.substr(0, key.size() - 8); }
inline uint64_t NumberOf(std::string_view key) { return ReadBe64(key, key.size() - 8); }

/// Records (key, payload) sorted by key bytewise, then by the order they were added.
class ExternalSorter {
 public:
  /// Runs of at most `memory_bytes` (keys, payloads and their bookkeeping) spill into files in
  /// `dir`. A sorter that never fills one run never touches the disk.
  ExternalSorter(std::filesystem::path dir, size_t memory_bytes);
  ~ExternalSorter();
  ExternalSorter(const ExternalSorter&) = delete;
  ExternalSorter& operator=(const ExternalSorter&) = delete;

  /// Adds a record. Errors: IOError (spilling a run). Not after Finish.
  [[nodiscard]] Status Add(std::string_view key, std::string_view payload);
  /// Ends the adding; then Next gives every record once, in order.
  [[nodiscard]] Status Finish();
  /// The next record; false when there is none left (the sorter's memory and files are then
  /// given back). Errors: IOError, Corruption.
  [[nodiscard]] Result<bool> Next(std::string* key, std::string* payload);

  /// Records added.
  int64_t size() const { return added_; }
  /// Runs spilled to disk from memory, in all (0: everything stayed in memory).
  int runs() const { return spilled_runs_; }

 private:
  struct Run;
  void SortRun();  // index_ by key, stable
  Status SpillRun();
  void Release();  // everything Next no longer needs
  // The k-way merge over runs_: StartMerge reads each run's first record, NextMerged hands out
  // the least ([u32 key size][key][payload]).
  // `merging_`: the runs being merged (runs_, or a group MergeRuns takes).
  bool RunAfter(int a, int b) const;
  Status StartMerge(std::vector<std::unique_ptr<Run>>* runs);
  Result<bool> NextMerged(std::string* record);
  Result<std::unique_ptr<Run>> MergeRuns(std::vector<std::unique_ptr<Run>> group);
  std::vector<std::unique_ptr<Run>>* merging_ = nullptr;

  std::filesystem::path dir_;
  size_t memory_bytes_;
  int64_t added_ = 0;
  int spilled_runs_ = 0;
  bool finished_ = false;
  // The run being filled: records packed in one buffer, sorted by index.
  std::string arena_;
  std::vector<uint64_t>
      index_;  // arena offset of each record: [u32 key size][key][u32 size][payload]
  std::vector<std::unique_ptr<Run>> runs_;
  // Merge state: a min-heap of run numbers by current key (then run number: earlier runs hold
  // earlier records).
  std::vector<int> heap_;
  size_t memory_next_ = 0;  // when nothing spilled: the next index_ entry
  std::string merged_;      // the record NextMerged handed out last
};

}  // namespace mm::pack
