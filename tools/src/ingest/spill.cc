// spill.cc: see spill.h.
#include "ingest/spill.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

constexpr size_t kWriteBuffer = size_t{1} << 20;  // bytes gathered before a write
constexpr size_t kReadBuffer = size_t{64} << 10;  // bytes read at a time by each reader
// The most runs merged at once: more are first merged in groups of this many into longer runs,
// so the merge's buffers stay within kMaxFanIn * kReadBuffer whatever the input's size.
constexpr size_t kMaxFanIn = 32;
constexpr uint32_t kMaxRecord = uint32_t{1} << 30;

void PutU32(std::string* out, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  out->append(b, 4);
}

uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

std::string Be64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) out[i] = static_cast<char>(v & 0xFF);
  return out;
}

uint64_t ReadBe64(std::string_view s, size_t at) {
  uint64_t v = 0;
  for (size_t i = at; i < at + 8; ++i) v = v << 8 | static_cast<unsigned char>(s[i]);
  return v;
}

std::string TextKey(std::string_view text, uint64_t n) {
  std::string key;
  key.reserve(text.size() + 10);
  for (char c : text) {
    key.push_back(c);
    if (c == '\0') key.push_back('\xFF');
  }
  key.append(2, '\0');
  key += Be64(n);
  return key;
}

std::string TextOf(std::string_view key) {
  std::string text;
  const std::string_view escaped = TextOrderOf(key);  // ends with 00 00
  for (size_t i = 0; i + 2 < escaped.size(); ++i) {
    text.push_back(escaped[i]);
    if (escaped[i] == '\0') ++i;  // 00 FF is one NUL
  }
  return text;
}

Result<UniqueFd> OpenSpillFile(const fs::path& dir) {
  return OpenUnnamedFile(
      dir.string(), ".mmpack-spill-",
      "cannot write " + (dir / "").string() + " (a temporary file of the build's ingest)");
}

Result<std::unique_ptr<SpillFile>> SpillFile::Create(const fs::path& dir) {
  MM_ASSIGN_OR_RETURN(UniqueFd fd, OpenSpillFile(dir));
  return std::unique_ptr<SpillFile>(new SpillFile(std::move(fd), dir));
}

std::string SpillFile::What() const {
  return (dir_ / "").string() + " (an unnamed temporary file of the build's ingest)";
}

Result<int64_t> SpillFile::Append(std::string_view record) {
  if (record.size() >= kMaxRecord) {
    return Status::InvalidArgument("a spilled record of " + std::to_string(record.size()) +
                                   " bytes (at most 1 GiB)");
  }
  const int64_t at = size();
  PutU32(&buffer_, static_cast<uint32_t>(record.size()));
  buffer_.append(record);
  if (buffer_.size() >= kWriteBuffer) MM_RETURN_NOT_OK(Flush());
  return at;
}

Status SpillFile::Flush() {
  if (buffer_.empty()) return Status::OK();
  // Appended at the descriptor's offset, which only these writes move (readers use pread).
  MM_RETURN_NOT_OK(WriteAll(fd_.get(), buffer_.data(), buffer_.size(), "cannot write " + What()));
  written_ += static_cast<int64_t>(buffer_.size());
  if (buffer_.capacity() > 4 * kWriteBuffer) {
    std::string().swap(buffer_);  // a huge record's room is given back
  } else {
    buffer_.clear();
  }
  return Status::OK();
}

Status SpillFile::Close() {
  MM_RETURN_NOT_OK(Flush());
  std::string().swap(buffer_);
  return Status::OK();
}

Status SpillFile::Reader::Fill(size_t need) {
  if (at_ > 0) {
    buffer_.erase(0, at_);
    at_ = 0;
  }
  while (buffer_.size() < need) {
    const size_t want = std::max(kReadBuffer, need - buffer_.size());
    const int64_t left = end_ - pos_;
    if (left <= 0) return Status::Corruption(what_ + " ends inside a record");
    const size_t n = static_cast<size_t>(std::min<int64_t>(left, static_cast<int64_t>(want)));
    const size_t old = buffer_.size();
    buffer_.resize(old + n);
    const ssize_t got = ::pread(fd_, buffer_.data() + old, n, pos_);
    if (got < 0 && errno == EINTR) {
      buffer_.resize(old);
      continue;
    }
    if (got <= 0) return ErrnoStatus(got < 0 ? errno : EIO, "cannot read " + what_);
    buffer_.resize(old + static_cast<size_t>(got));
    pos_ += got;
  }
  return Status::OK();
}

Result<bool> SpillFile::Reader::Next(std::string* record) {
  const size_t have = buffer_.size() - at_;
  if (have == 0 && pos_ >= end_) return false;
  if (have < 4) MM_RETURN_NOT_OK(Fill(4));
  const uint32_t size = GetU32(buffer_.data() + at_);
  if (size >= kMaxRecord) return Status::Corruption(what_ + " holds a damaged record");
  if (buffer_.size() - at_ < 4 + size) MM_RETURN_NOT_OK(Fill(4 + size));
  record->assign(buffer_.data() + at_ + 4, size);
  at_ += 4 + size;
  if (at_ == buffer_.size() && buffer_.capacity() > 4 * kReadBuffer) {
    std::string().swap(buffer_);  // a huge record's room is given back
    at_ = 0;
  }
  return true;
}

// One spilled run, and the record it is at during the merge.
struct ExternalSorter::Run {
  int level = 0;  // 0: spilled from memory; L + 1: merged from kMaxFanIn runs of level L
  std::unique_ptr<SpillFile> file;
  std::optional<SpillFile::Reader> reader;
  std::string record;  // [u32 key size][key][payload]
  std::string_view key() const { return std::string_view(record).substr(4, GetU32(record.data())); }
};

ExternalSorter::ExternalSorter(fs::path dir, size_t memory_bytes)
    : dir_(std::move(dir)), memory_bytes_(std::max<size_t>(memory_bytes, 4096)) {}

ExternalSorter::~ExternalSorter() = default;

namespace {

std::string_view KeyAt(const std::string& arena, uint64_t at) {
  return std::string_view(arena).substr(at + 4, GetU32(arena.data() + at));
}

}  // namespace

Status ExternalSorter::Add(std::string_view key, std::string_view payload) {
  if (finished_) return Status::Internal("ExternalSorter::Add after Finish");
  if (key.size() >= kMaxRecord || payload.size() >= kMaxRecord) {
    return Status::InvalidArgument("a sorted record over 1 GiB");
  }
  // Room for a whole run from the start, so that growing by doubling never takes twice the
  // budget (the pages are only resident once written).
  if (arena_.capacity() < memory_bytes_) arena_.reserve(memory_bytes_);
  index_.push_back(arena_.size());
  PutU32(&arena_, static_cast<uint32_t>(key.size()));
  arena_.append(key);
  PutU32(&arena_, static_cast<uint32_t>(payload.size()));
  arena_.append(payload);
  ++added_;
  if (arena_.size() + index_.size() * sizeof(uint64_t) >= memory_bytes_) return SpillRun();
  return Status::OK();
}

void ExternalSorter::SortRun() {
  std::stable_sort(index_.begin(), index_.end(),
                   [this](uint64_t a, uint64_t b) { return KeyAt(arena_, a) < KeyAt(arena_, b); });
}

Status ExternalSorter::SpillRun() {
  SortRun();
  auto run = std::make_unique<Run>();
  MM_ASSIGN_OR_RETURN(run->file, SpillFile::Create(dir_));
  std::string record;
  for (uint64_t at : index_) {
    const uint32_t klen = GetU32(arena_.data() + at);
    const uint32_t plen = GetU32(arena_.data() + at + 4 + klen);
    record.assign(arena_.data() + at, 4 + klen);
    record.append(arena_.data() + at + 8 + klen, plen);
    MM_RETURN_NOT_OK(run->file->Append(record).status());
  }
  MM_RETURN_NOT_OK(run->file->Close());
  runs_.push_back(std::move(run));
  ++spilled_runs_;
  // kMaxFanIn runs of one level at the end: merged into one of the next level, so that open
  // files (one a run) stay below kMaxFanIn a level however long the input, and every record is
  // rewritten about log_kMaxFanIn(runs) times.
  while (runs_.size() >= kMaxFanIn) {
    const size_t first = runs_.size() - kMaxFanIn;
    const int level = runs_.back()->level;
    bool same = true;
    for (size_t i = first; i < runs_.size(); ++i) same &= runs_[i]->level == level;
    if (!same) break;
    std::vector<std::unique_ptr<Run>> group;
    for (size_t i = first; i < runs_.size(); ++i) group.push_back(std::move(runs_[i]));
    runs_.resize(first);
    MM_ASSIGN_OR_RETURN(std::unique_ptr<Run> merged, MergeRuns(std::move(group)));
    merged->level = level + 1;
    runs_.push_back(std::move(merged));
  }
  std::string().swap(arena_);
  std::vector<uint64_t>().swap(index_);
  return Status::OK();
}

bool ExternalSorter::RunAfter(int a, int b) const {
  const std::string_view ka = (*merging_)[a]->key(), kb = (*merging_)[b]->key();
  return ka != kb ? ka > kb : a > b;  // equal keys: the earlier run (earlier records) first
}

Status ExternalSorter::StartMerge(std::vector<std::unique_ptr<Run>>* runs) {
  merging_ = runs;
  heap_.clear();
  for (size_t i = 0; i < runs->size(); ++i) {
    Run& r = *(*runs)[i];
    r.reader.emplace(r.file->Read());
    MM_ASSIGN_OR_RETURN(bool more, r.reader->Next(&r.record));
    if (more) heap_.push_back(static_cast<int>(i));
  }
  std::make_heap(heap_.begin(), heap_.end(), [this](int a, int b) { return RunAfter(a, b); });
  return Status::OK();
}

Result<bool> ExternalSorter::NextMerged(std::string* record) {
  if (heap_.empty()) return false;
  auto after = [this](int a, int b) { return RunAfter(a, b); };
  std::pop_heap(heap_.begin(), heap_.end(), after);
  Run& r = *(*merging_)[heap_.back()];
  record->swap(r.record);
  MM_ASSIGN_OR_RETURN(bool more, r.reader->Next(&r.record));
  if (more) {
    std::push_heap(heap_.begin(), heap_.end(), after);
  } else {
    heap_.pop_back();
  }
  return true;
}

Result<std::unique_ptr<ExternalSorter::Run>> ExternalSorter::MergeRuns(
    std::vector<std::unique_ptr<Run>> group) {
  auto out = std::make_unique<Run>();
  MM_ASSIGN_OR_RETURN(out->file, SpillFile::Create(dir_));
  MM_RETURN_NOT_OK(StartMerge(&group));
  for (std::string record;;) {
    MM_ASSIGN_OR_RETURN(bool more, NextMerged(&record));
    if (!more) break;
    MM_RETURN_NOT_OK(out->file->Append(record).status());
  }
  MM_RETURN_NOT_OK(out->file->Close());
  merging_ = nullptr;
  return out;  // `group`'s files are closed here
}

Status ExternalSorter::Finish() {
  if (finished_) return Status::OK();
  finished_ = true;
  if (runs_.empty()) {  // all in memory: sort the one run and hand it out from there
    SortRun();
    return Status::OK();
  }
  if (!index_.empty()) MM_RETURN_NOT_OK(SpillRun());
  // More runs than one merge takes (several levels' worth): merged kMaxFanIn at a time, in
  // order, into longer runs.
  while (runs_.size() > kMaxFanIn) {
    std::vector<std::unique_ptr<Run>> all = std::move(runs_), merged;
    for (size_t first = 0; first < all.size(); first += kMaxFanIn) {
      std::vector<std::unique_ptr<Run>> group;
      for (size_t i = first; i < std::min(all.size(), first + kMaxFanIn); ++i) {
        group.push_back(std::move(all[i]));
      }
      MM_ASSIGN_OR_RETURN(std::unique_ptr<Run> run, MergeRuns(std::move(group)));
      merged.push_back(std::move(run));
    }
    runs_ = std::move(merged);
  }
  return StartMerge(&runs_);
}

void ExternalSorter::Release() {
  std::string().swap(arena_);
  std::vector<uint64_t>().swap(index_);
  memory_next_ = 0;
  heap_.clear();
  runs_.clear();  // closes the runs' files
  std::string().swap(merged_);
}

Result<bool> ExternalSorter::Next(std::string* key, std::string* payload) {
  if (!finished_) return Status::Internal("ExternalSorter::Next before Finish");
  if (runs_.empty()) {
    if (memory_next_ >= index_.size()) {
      Release();
      return false;
    }
    const uint64_t at = index_[memory_next_++];
    const uint32_t klen = GetU32(arena_.data() + at);
    key->assign(arena_.data() + at + 4, klen);
    const uint32_t plen = GetU32(arena_.data() + at + 4 + klen);
    payload->assign(arena_.data() + at + 8 + klen, plen);
    return true;
  }
  MM_ASSIGN_OR_RETURN(bool more, NextMerged(&merged_));
  if (!more) {
    Release();
    return false;
  }
  const uint32_t klen = GetU32(merged_.data());
  key->assign(merged_.data() + 4, klen);
  payload->assign(merged_.data() + 4 + klen, merged_.size() - 4 - klen);
  return true;
}

}  // namespace mm::pack
