// feed.cc: IngestFeed (feed.h).
#include "ingest/feed.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ingest/common.h"
#include "ingest/keys.h"
#include "ingest/sample_list.h"
#include "mm/internal/file.h"

namespace mm::pack {

namespace fs = std::filesystem;

namespace {

constexpr uint32_t kMaxFeedString = uint32_t{1} << 30;

// The stream from `fd` through a buffer; `record_` names the record being read in errors.
class FeedStream {
 public:
  explicit FeedStream(int fd) : fd_(fd) {}

  // Exactly `size` bytes into `out` (may be null: skipped). Errors: IOError, Corruption (the
  // stream ends first).
  Status Read(void* out, size_t size) {
    auto* to = static_cast<char*>(out);
    while (size > 0) {
      if (at_ == end_) MM_RETURN_NOT_OK(Fill());
      const size_t n = std::min(size, end_ - at_);
      if (to != nullptr) {
        std::memcpy(to, buffer_.data() + at_, n);
        to += n;
      }
      at_ += n;
      size -= n;
    }
    return Status::OK();
  }
  // Up to `size` bytes now (at least one): for copying a long payload through. Errors: Read's.
  Result<std::string_view> Some(size_t size) {
    if (at_ == end_) MM_RETURN_NOT_OK(Fill());
    const size_t n = std::min(size, end_ - at_);
    std::string_view out(buffer_.data() + at_, n);
    at_ += n;
    return out;
  }
  template <typename T>
  Result<T> Number() {
    T v{};
    MM_RETURN_NOT_OK(Read(&v, sizeof v));  // little-endian: the hosts mmpack builds on
    return v;
  }
  Status String(std::string* s) {
    MM_ASSIGN_OR_RETURN(uint32_t n, Number<uint32_t>());
    if (n > kMaxFeedString) return Bad("a string of " + std::to_string(n) + " bytes");
    s->resize(n);
    return Read(s->data(), n);
  }
  // At the end of the stream: no byte left (the end record was the last).
  Result<bool> AtEnd() {
    if (at_ < end_) return false;
    Status filled = Fill();
    if (filled.ok()) return false;
    if (!eof_) return filled;
    return true;
  }
  Status Bad(const std::string& what) const {
    return Status::Corruption("feed: record " + std::to_string(record_) + ": " + what);
  }
  uint64_t record_ = 0;

 private:
  Status Fill() {
    if (buffer_.empty()) buffer_.resize(size_t{1} << 20);
    for (;;) {
      const ssize_t n = ::read(fd_, buffer_.data(), buffer_.size());
      if (n > 0) {
        at_ = 0;
        end_ = static_cast<size_t>(n);
        return Status::OK();
      }
      if (n == 0) {
        eof_ = true;
        return Bad(
            "the stream ended before its end record (the writing program failed or was "
            "interrupted); nothing is published");
      }
      if (errno != EINTR) return ErrnoStatus(errno, "cannot read the feed");
    }
  }
  int fd_;
  std::string buffer_;
  size_t at_ = 0, end_ = 0;
  bool eof_ = false;
};

Status ReadField(FeedStream* in, FieldValue* v) {
  MM_ASSIGN_OR_RETURN(uint8_t type, in->Number<uint8_t>());
  *v = FieldValue();
  switch (type) {
    case 0:
      return Status::OK();
    case 1:
    case 4: {
      v->type = type == 1 ? FieldValue::Type::kInt : FieldValue::Type::kUint;
      MM_ASSIGN_OR_RETURN(v->i, in->Number<int64_t>());
      return Status::OK();
    }
    case 2: {
      v->type = FieldValue::Type::kFloat;
      MM_ASSIGN_OR_RETURN(v->f, in->Number<double>());
      return Status::OK();
    }
    case 3:
      v->type = FieldValue::Type::kString;
      return in->String(&v->s);
    default:
      return in->Bad("field type " + std::to_string(type) + " is none of 0..4");
  }
}

// An encoded image of `size` bytes from the stream into the new file `path`.
Status CopyImage(FeedStream* in, uint64_t size, const fs::path& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus(errno, "cannot create " + path.string());
  while (size > 0) {
    MM_ASSIGN_OR_RETURN(std::string_view part, in->Some(size));
    MM_RETURN_NOT_OK(WriteAll(fd.get(), part.data(), part.size(), "cannot write " + path.string()));
    size -= part.size();
  }
  return Status::OK();
}

// One 'S' record (its tag read) into `s`.
Status ReadSample(FeedStream* in, const FieldNames& fields, const fs::path& image_dir,
                  RawSample* s) {
  *s = RawSample();
  MM_RETURN_NOT_OK(in->String(&s->key));
  MM_RETURN_NOT_OK(in->String(&s->source));
  if (s->source.empty()) return in->Bad("the sample has no source");
  if (s->key.empty()) s->key = StripExtension(s->source);
  MM_ASSIGN_OR_RETURN(uint32_t captions, in->Number<uint32_t>());
  if (captions > kMaxFeedString) return in->Bad("too many captions");
  s->captions.resize(captions);
  for (std::string& c : s->captions) MM_RETURN_NOT_OK(in->String(&c));
  MM_ASSIGN_OR_RETURN(uint32_t count, in->Number<uint32_t>());
  if (count != fields.extra.size()) {
    return in->Bad(std::to_string(count) + " fields, where the build keeps " +
                   std::to_string(fields.extra.size()));
  }
  s->fields.resize(count);
  for (FieldValue& v : s->fields) MM_RETURN_NOT_OK(ReadField(in, &v));
  MM_ASSIGN_OR_RETURN(uint8_t kind, in->Number<uint8_t>());
  if (kind == 'P') return in->String(&s->path);
  if (kind != 'B') return in->Bad("image kind " + std::to_string(kind) + " is neither P nor B");
  MM_ASSIGN_OR_RETURN(uint64_t size, in->Number<uint64_t>());
  s->path = (image_dir / std::to_string(in->record_)).string();
  return CopyImage(in, size, s->path);
}

}  // namespace

Result<IngestResult> IngestFeed(int fd, const FieldNames& fields, const fs::path& image_dir,
                                const fs::path& spill_dir) {
  FeedStream in(fd);
  char magic[sizeof kFeedMagic - 1];
  MM_RETURN_NOT_OK(in.Read(magic, sizeof magic));
  if (std::memcmp(magic, kFeedMagic, sizeof magic) != 0) {
    return Status::Corruption("feed: the stream does not start with MMFEED1 (not mmpack.Writer's)");
  }
  IngestResult result;
  result.format = InputFormat::kFeed;
  MM_ASSIGN_OR_RETURN(result.list, SampleList::Create(spill_dir));
  RawSample s;
  for (;; ++in.record_) {
    MM_ASSIGN_OR_RETURN(uint8_t tag, in.Number<uint8_t>());
    if (tag == 'E') break;
    if (tag != 'S') return in.Bad("tag " + std::to_string(tag) + " is neither S nor E");
    MM_RETURN_NOT_OK(ReadSample(&in, fields, image_dir, &s));
    CapCaptions(&s.captions, fields.max_caption_bytes);  // as soon as read, as manifests do
    MM_RETURN_NOT_OK(result.list->Add(s));
  }
  MM_ASSIGN_OR_RETURN(uint64_t count, in.Number<uint64_t>());
  if (count != in.record_) {
    return in.Bad("the end record counts " + std::to_string(count) + " samples, the stream held " +
                  std::to_string(in.record_));
  }
  MM_ASSIGN_OR_RETURN(bool end, in.AtEnd());
  if (!end) return in.Bad("bytes after the end record");
  MM_RETURN_NOT_OK(result.list->Finish());
  MM_RETURN_NOT_OK(FinishIngestList(fields, spill_dir, &result));
  return result;
}

}  // namespace mm::pack
