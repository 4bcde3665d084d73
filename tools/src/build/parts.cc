// parts.cc: see build_parts.h.
#include "build/parts.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "build/resume.h"
#include "mm/internal/c_handles.h"
#include "mm/internal/checksum.h"
#include "mm/internal/file.h"
#include "set/output_dir.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kSpoolMagic[8] = {'M', 'M', 'S', 'P', 'O', 'O', 'L', '1'};
constexpr size_t kBuffer = size_t{1} << 20;

// A count as a launcher or --part writes it: decimal digits only, without sign, blanks or
// leading zeros ("0" itself excepted), at most 18 digits. Anything else is refused, so that
// ' 0/2', '0/+2' and '00/02' are not taken for 0/2.
Result<int64_t> ParseCount(const std::string& text, const std::string& what) {
  const bool digits = !text.empty() && text.size() <= 18 &&
                      text.find_first_not_of("0123456789") == std::string::npos &&
                      (text.size() == 1 || text[0] != '0');
  if (!digits) return Status::InvalidArgument(what + " is '" + text + "', not a count");
  return static_cast<int64_t>(std::stoll(text));
}

// Little-endian fixed-width fields and length-prefixed strings into a byte buffer.
class Out {
 public:
  template <typename T>
  void Put(T v) {
    Raw(&v, sizeof v);
  }
  void U8(uint8_t v) { Put(v); }
  void U64(uint64_t v) { Put(v); }
  void I64(int64_t v) { Put(v); }
  void I32(int32_t v) { Put(v); }
  void F64(double v) { Put(v); }
  void Str(std::string_view s) {
    U64(s.size());
    buf_.append(s.data(), s.size());
  }
  void Raw(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  std::string& buf() { return buf_; }

 private:
  std::string buf_;
};

// Reads what Out wrote; any overrun sets failed() (and returns zeros).
class In {
 public:
  In(const char* p, size_t n) : p_(p), end_(p + n) {}
  template <typename T>
  T Get() {
    T v{};
    Raw(&v, sizeof v);
    return v;
  }
  uint8_t U8() { return Get<uint8_t>(); }
  uint64_t U64() { return Get<uint64_t>(); }
  int64_t I64() { return Get<int64_t>(); }
  int32_t I32() { return Get<int32_t>(); }
  double F64() { return Get<double>(); }
  std::string Str() {
    const uint64_t n = U64();
    if (n > static_cast<uint64_t>(end_ - p_)) {
      failed_ = true;
      return {};
    }
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  // A length-prefixed string's bytes, straight into `out`.
  void Bytes(std::vector<uint8_t>* out) {
    const uint64_t n = U64();
    if (n > static_cast<uint64_t>(end_ - p_)) {
      failed_ = true;
      out->clear();
      return;
    }
    out->assign(reinterpret_cast<const uint8_t*>(p_), reinterpret_cast<const uint8_t*>(p_) + n);
    p_ += n;
  }
  // A count of items of at least `min_bytes` each that the rest can hold.
  uint64_t Count(size_t min_bytes) {
    const uint64_t n = U64();
    if (n > static_cast<uint64_t>(end_ - p_) / std::max<size_t>(1, min_bytes)) {
      failed_ = true;
      return 0;
    }
    return n;
  }
  void Raw(void* out, size_t n) {
    if (n > static_cast<size_t>(end_ - p_)) {
      failed_ = true;
      std::memset(out, 0, n);
      return;
    }
    std::memcpy(out, p_, n);
    p_ += n;
  }
  bool failed() const { return failed_; }
  bool done() const { return p_ == end_; }

 private:
  const char* p_;
  const char* end_;
  bool failed_ = false;
};

void Encode(const ProcessedSample& s, Out* o) {
  o->U64(s.index);
  o->U64(s.source_stamp);
  o->U8(s.ok ? 1 : 0);
  if (s.ok) {
    const EncodedSample& e = s.encoded;
    o->Str(e.key);
    o->Str(e.source);
    o->Str(std::string_view(reinterpret_cast<const char*>(e.image_chunk.data()),
                            e.image_chunk.size()));
    for (int32_t v : {e.stored_width, e.stored_height, e.original_width, e.original_height,
                      e.valid_box[0], e.valid_box[1], e.valid_box[2], e.valid_box[3]}) {
      o->I32(v);
    }
    o->U64(e.captions.size());
    for (size_t c = 0; c < e.captions.size(); ++c) {
      o->Str(e.captions[c]);
      o->U64(e.tokens[c].size());
      o->Raw(e.tokens[c].data(), e.tokens[c].size() * sizeof(int32_t));
    }
    o->U64(e.metadata.size());
    for (const auto& m : e.metadata) {
      o->U8(static_cast<uint8_t>(m.type));
      o->I64(m.i);
      o->F64(m.f);
      o->Str(m.s);
      o->U64(m.u);
    }
    o->I64(s.truncated);
    o->U64(s.unk.size());
    for (int u : s.unk) o->I32(u);
    o->U64(s.pixel_hash);
    o->U64(s.perceptual_hash);
  } else {
    o->Str(s.drop.source);
    o->Str(s.drop.key);
    o->Str(s.drop.reason);
    o->Str(s.drop.detail);
  }
  o->U64(s.dropped_captions.size());
  for (const DroppedCaption& d : s.dropped_captions) {
    o->Str(d.source);
    o->Str(d.key);
    o->I64(d.caption_index);
    o->Str(d.reason);
  }
}

bool Decode(In* in, ProcessedSample* s) {
  *s = ProcessedSample();
  s->index = in->U64();
  s->source_stamp = in->U64();
  s->ok = in->U8() == 1;
  if (s->ok) {
    EncodedSample& e = s->encoded;
    e.key = in->Str();
    e.source = in->Str();
    in->Bytes(&e.image_chunk);
    e.stored_width = in->I32();
    e.stored_height = in->I32();
    e.original_width = in->I32();
    e.original_height = in->I32();
    for (int32_t& v : e.valid_box) v = in->I32();
    const uint64_t captions = in->Count(16);
    for (uint64_t c = 0; c < captions && !in->failed(); ++c) {
      e.captions.push_back(in->Str());
      const uint64_t n = in->Count(sizeof(int32_t));
      std::vector<int32_t> ids(n);
      in->Raw(ids.data(), n * sizeof(int32_t));
      e.tokens.push_back(std::move(ids));
    }
    const uint64_t fields = in->Count(33);
    for (uint64_t f = 0; f < fields && !in->failed(); ++f) {
      mm::reader::MetadataValue m;
      m.type = static_cast<mm::reader::MetadataValue::Type>(in->U8());
      m.i = in->I64();
      m.f = in->F64();
      m.s = in->Str();
      m.u = in->U64();
      e.metadata.push_back(std::move(m));
    }
    s->truncated = in->I64();
    const uint64_t unk = in->Count(sizeof(int32_t));
    for (uint64_t u = 0; u < unk; ++u) s->unk.push_back(in->I32());
    s->pixel_hash = in->U64();
    s->perceptual_hash = in->U64();
    if (s->unk.size() != e.captions.size()) return false;
  } else {
    s->drop.source = in->Str();
    s->drop.key = in->Str();
    s->drop.reason = in->Str();
    s->drop.detail = in->Str();
  }
  const uint64_t dropped = in->Count(32);
  for (uint64_t d = 0; d < dropped && !in->failed(); ++d) {
    DroppedCaption c;
    c.source = in->Str();
    c.key = in->Str();
    c.caption_index = in->I64();
    c.reason = in->Str();
    s->dropped_captions.push_back(std::move(c));
  }
  return !in->failed() && in->done();
}

json SummaryJson(const SpoolSummary& s) {
  return {{"fingerprint", s.fingerprint}, {"begin", s.begin}, {"end", s.end},
          {"records", s.records},         {"bytes", s.bytes}, {"xxh3_64", s.xxh3_64},
          {"sources", s.sources}};
}

}  // namespace

Result<PartSpec> LauncherPart() {
  // (rank, size) variables of the launchers, in order of preference.
  static const char* const kLaunchers[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                              {"PMI_RANK", "PMI_SIZE"},
                                              {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS"}};
  PartSpec part;
  for (const auto& launcher : kLaunchers) {
    const char* rank = std::getenv(launcher[0]);
    const char* size = std::getenv(launcher[1]);
    if (rank == nullptr || size == nullptr) continue;
    MM_ASSIGN_OR_RETURN(int64_t r, ParseCount(rank, launcher[0]));
    MM_ASSIGN_OR_RETURN(int64_t n, ParseCount(size, launcher[1]));
    if (n <= 1) return part;  // one process: not split
    if (r >= n) {
      return Status::InvalidArgument(std::string(launcher[0]) + " " + rank + " is not below " +
                                     launcher[1] + " " + size);
    }
    part.index = r;
    part.count = n;
    part.origin = std::string(launcher[0]) + "/" + launcher[1];
    return part;
  }
  return part;
}

Result<PartSpec> ResolvePart(const std::string& flag) {
  if (flag.empty()) return PartSpec();  // one process, whatever the environment says
  if (flag == kPartAuto) return LauncherPart();
  const auto bad = [&flag] {
    return Status::InvalidArgument("--part is '" + flag +
                                   "'; it takes I/N (part I, 0-based, of N; 0 <= I < N, "
                                   "plain decimals) or auto (the rank and size of mpirun/srun)");
  };
  const size_t slash = flag.find('/');
  if (slash == std::string::npos) return bad();
  auto index = ParseCount(flag.substr(0, slash), "--part's I");
  auto count = ParseCount(flag.substr(slash + 1), "--part's N");
  if (!index.ok() || !count.ok() || *count < 1 || *index >= *count) return bad();
  PartSpec part;
  part.index = *index;
  part.count = *count;
  part.origin = "--part";
  return part;
}

SampleRange PartRange(const PartSpec& part, size_t total) {
  const auto at = [&](int64_t i) {
    return static_cast<size_t>((static_cast<unsigned __int128>(total) * static_cast<uint64_t>(i)) /
                               static_cast<uint64_t>(part.count));
  };
  return {at(part.index), at(part.index + 1)};
}

fs::path PartsFolder(const fs::path& staging) { return staging / ".parts"; }

std::string PartName(int64_t index, int64_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "part-%06lld-of-%06lld", static_cast<long long>(index),
                static_cast<long long>(count));
  return name;
}

struct SpoolWriter::Impl {
  fs::path folder;
  std::string name;
  SpoolSummary summary;
  UniqueFd fd;
  std::string buffer;
  Xxh3StatePtr hash{XXH3_createState()};
  int64_t added = 0;

  fs::path tmp() const { return folder / (name + ".spool.tmp"); }

  Status Flush() {
    XXH3_64bits_update(hash.get(), buffer.data(), buffer.size());
    MM_RETURN_NOT_OK(
        WriteAll(fd.get(), buffer.data(), buffer.size(), "cannot write " + tmp().string()));
    summary.bytes += static_cast<int64_t>(buffer.size());
    buffer.clear();
    return Status::OK();
  }
};

Result<std::unique_ptr<SpoolWriter>> SpoolWriter::Create(const fs::path& staging,
                                                         const PartSpec& part, SampleRange range,
                                                         std::string fingerprint) {
  std::unique_ptr<SpoolWriter> w(new SpoolWriter);
  w->impl_ = std::make_unique<Impl>();
  Impl& m = *w->impl_;
  m.folder = PartsFolder(staging);
  m.name = PartName(part.index, part.count);
  m.summary.fingerprint = std::move(fingerprint);
  m.summary.begin = static_cast<int64_t>(range.begin);
  m.summary.end = static_cast<int64_t>(range.end);
  std::error_code ec;
  fs::create_directories(m.folder, ec);
  if (ec) return Status::IOError("cannot create " + m.folder.string() + ": " + ec.message());
  fs::remove(m.folder / (m.name + ".done"), ec);
  m.fd = UniqueFd(::open(m.tmp().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!m.fd.valid()) return ErrnoStatus(errno, "cannot write " + m.tmp().string());
  XXH3_64bits_reset(m.hash.get());
  m.buffer.append(kSpoolMagic, sizeof kSpoolMagic);
  return w;
}

SpoolWriter::~SpoolWriter() = default;

Status SpoolWriter::Add(const ProcessedSample& sample) {
  Impl& m = *impl_;
  Out record;
  Encode(sample, &record);
  // [size][record][XXH3-64 of record]: a damaged record is found before it is used.
  const uint64_t size = record.buf().size();
  const uint64_t check = XXH3_64bits(record.buf().data(), record.buf().size());
  m.buffer.append(reinterpret_cast<const char*>(&size), sizeof size);
  m.buffer.append(record.buf());
  m.buffer.append(reinterpret_cast<const char*>(&check), sizeof check);
  ++m.added;
  m.summary.sources = ChainSource(m.summary.sources, sample.index, sample.source_stamp);
  if (m.buffer.size() >= kBuffer) return m.Flush();
  return Status::OK();
}

Status SpoolWriter::Finish() {
  Impl& m = *impl_;
  if (m.added != m.summary.end - m.summary.begin) {
    return Status::InvalidArgument("part spool " + m.name + " holds " + std::to_string(m.added) +
                                   " samples of " +
                                   std::to_string(m.summary.end - m.summary.begin));
  }
  MM_RETURN_NOT_OK(m.Flush());
  if (::fsync(m.fd.get()) != 0) return ErrnoStatus(errno, "fsync " + m.tmp().string());
  m.fd.Reset();
  const fs::path spool = m.folder / (m.name + ".spool");
  if (::rename(m.tmp().c_str(), spool.c_str()) != 0) {
    return ErrnoStatus(errno, "rename " + m.tmp().string() + " -> " + spool.string());
  }
  m.summary.records = m.added;
  m.summary.xxh3_64 = Xxh3Hex64(XXH3_64bits_digest(m.hash.get()));
  return WriteFileDurably((m.folder / (m.name + ".done")).string(),
                          SummaryJson(m.summary).dump() + "\n");
}

std::optional<SpoolSummary> FinishedPart(const fs::path& staging, int64_t index, int64_t count,
                                         const std::string& fingerprint) {
  const fs::path folder = PartsFolder(staging);
  const std::string name = PartName(index, count);
  std::string text;
  if (!ReadRegularFile((folder / (name + ".done")).string(), &text).ok()) return std::nullopt;
  try {
    const json j = json::parse(text);
    SpoolSummary s;
    s.fingerprint = j.at("fingerprint").get<std::string>();
    s.begin = j.at("begin").get<int64_t>();
    s.end = j.at("end").get<int64_t>();
    s.records = j.at("records").get<int64_t>();
    s.bytes = j.at("bytes").get<int64_t>();
    s.xxh3_64 = j.at("xxh3_64").get<std::string>();
    s.sources = j.at("sources").get<uint64_t>();
    std::error_code ec;
    const auto size = fs::file_size(folder / (name + ".spool"), ec);
    if (s.fingerprint != fingerprint || ec || static_cast<int64_t>(size) != s.bytes) {
      return std::nullopt;
    }
    return s;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

void RecordPartFailure(const fs::path& staging, const PartSpec& part, const Status& status) {
  const fs::path path = PartsFolder(staging) / (PartName(part.index, part.count) + ".failed");
  std::error_code ec;
  if (status.ok()) {
    fs::remove(path, ec);
    return;
  }
  if (!fs::is_directory(staging, ec)) return;  // published meanwhile: nothing to tell
  fs::create_directory(path.parent_path(), ec);
  (void)WriteFileDurably(path.string(), status.ToString() + "\n");
}

std::string PartFailure(const fs::path& staging, int64_t index, int64_t count, std::time_t since) {
  std::string text;
  const fs::path path = PartsFolder(staging) / (PartName(index, count) + ".failed");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || st.st_mtime + 5 < since) return "";  // none, or stale
  if (!ReadRegularFile(path.string(), &text).ok()) return "";
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return "part " + std::to_string(index) + " of " + std::to_string(count) + " failed: " + text;
}

std::string FailedPart(const fs::path& staging, int64_t count, std::time_t since) {
  for (int64_t i = 0; i < count; ++i) {
    std::string failed = PartFailure(staging, i, count, since);
    if (!failed.empty()) return failed;
  }
  return "";
}

struct SpoolReader::Impl {
  fs::path staging;
  int64_t count = 0;
  std::vector<SpoolSummary> parts;
  size_t part = 0;  // the spool being read
  std::string name;
  UniqueFd fd;
  Xxh3StatePtr hash{XXH3_createState()};
  int64_t records = 0, bytes = 0;
  std::string buffer;
  size_t at = 0;  // next unread byte of buffer
  bool eof = false;

  // The spool is damaged: its .done is removed, so that --resume makes the part again.
  Status Corrupt(const std::string& why) const {
    std::error_code ec;
    fs::remove(PartsFolder(staging) / (name + ".done"), ec);
    return Status::Corruption("part spool " + name + ".spool: " + why + "; run part " +
                              std::to_string(part) + " again with --resume");
  }

  // At least `n` unread bytes in buffer, unless the file ends first.
  Status Fill(size_t n) {
    if (buffer.size() - at >= n || eof) return Status::OK();
    buffer.erase(0, at);
    at = 0;
    while (buffer.size() < n && !eof) {
      const size_t old = buffer.size();
      buffer.resize(old + std::max(kBuffer, n - old));
      const ssize_t got = ::read(fd.get(), buffer.data() + old, buffer.size() - old);
      if (got < 0 && errno == EINTR) {
        buffer.resize(old);
        continue;
      }
      if (got < 0) return ErrnoStatus(errno, "read " + name + ".spool");
      buffer.resize(old + static_cast<size_t>(got));
      XXH3_64bits_update(hash.get(), buffer.data() + old, static_cast<size_t>(got));
      bytes += got;
      eof = got == 0;
    }
    return Status::OK();
  }

  Status Open() {
    name = PartName(static_cast<int64_t>(part), count);
    const fs::path path = PartsFolder(staging) / (name + ".spool");
    fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return ErrnoStatus(errno, "open " + path.string());
    XXH3_64bits_reset(hash.get());
    records = bytes = 0;
    buffer.clear();
    at = 0;
    eof = false;
    MM_RETURN_NOT_OK(Fill(sizeof kSpoolMagic));
    if (buffer.size() < sizeof kSpoolMagic ||
        std::memcmp(buffer.data(), kSpoolMagic, sizeof kSpoolMagic) != 0) {
      return Corrupt("not a spool");
    }
    at = sizeof kSpoolMagic;
    return Status::OK();
  }

  // The end of the current spool: everything its .done file says, checked.
  Status Close() {
    const SpoolSummary& s = parts[part];
    if (records != s.records || bytes != s.bytes ||
        Xxh3Hex64(XXH3_64bits_digest(hash.get())) != s.xxh3_64) {
      return Corrupt("its records, size or XXH3-64 are not those of its .done file");
    }
    fd.Reset();
    return Status::OK();
  }
};

SpoolReader::SpoolReader(fs::path staging, int64_t count, std::vector<SpoolSummary> parts)
    : impl_(std::make_unique<Impl>()) {
  impl_->staging = std::move(staging);
  impl_->count = count;
  impl_->parts = std::move(parts);
}

SpoolReader::~SpoolReader() = default;

Result<bool> SpoolReader::Next(ProcessedSample* out) {
  Impl& m = *impl_;
  while (m.part < m.parts.size()) {
    if (!m.fd.valid()) MM_RETURN_NOT_OK(m.Open());
    MM_RETURN_NOT_OK(m.Fill(sizeof(uint64_t)));
    if (m.buffer.size() - m.at == 0 && m.eof) {
      MM_RETURN_NOT_OK(m.Close());
      ++m.part;
      continue;
    }
    uint64_t size = 0;
    if (m.buffer.size() - m.at < sizeof size) return m.Corrupt("it ends inside a record");
    std::memcpy(&size, m.buffer.data() + m.at, sizeof size);
    m.at += sizeof size;
    // What the spool still holds past this size field, by its .done file.
    const int64_t left =
        m.parts[m.part].bytes - (m.bytes - static_cast<int64_t>(m.buffer.size() - m.at));
    if (left < 0 || size > static_cast<uint64_t>(left) ||
        static_cast<uint64_t>(left) - size < sizeof(uint64_t)) {
      return m.Corrupt("a record's size (" + std::to_string(size) + ") runs past its end");
    }
    MM_RETURN_NOT_OK(m.Fill(size + sizeof(uint64_t)));
    if (m.buffer.size() - m.at < size + sizeof(uint64_t)) {
      return m.Corrupt("it ends inside a record");
    }
    uint64_t check = 0;
    std::memcpy(&check, m.buffer.data() + m.at + size, sizeof check);
    if (XXH3_64bits(m.buffer.data() + m.at, size) != check) {
      return m.Corrupt("record " + std::to_string(m.records) + " does not match its checksum");
    }
    In in(m.buffer.data() + m.at, size);
    m.at += size + sizeof check;
    const SpoolSummary& s = m.parts[m.part];
    if (!Decode(&in, out) || out->index != static_cast<size_t>(s.begin + m.records)) {
      return m.Corrupt("record " + std::to_string(m.records) + " cannot be read");
    }
    ++m.records;
    return true;
  }
  return false;
}

Result<UniqueFd> TryLockFinish(const fs::path& staging) {
  const fs::path path = PartsFolder(staging) / "finish.lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid()) return ErrnoStatus(errno, "cannot create " + path.string());
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return UniqueFd();
    return ErrnoStatus(errno, "cannot lock " + path.string());
  }
  return fd;
}

}  // namespace mm::pack
