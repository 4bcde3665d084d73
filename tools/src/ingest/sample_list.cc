// sample_list.cc: see sample_list.h.
#include "ingest/sample_list.h"

#include <cstring>
#include <utility>

namespace mm::pack {
namespace {

void PutU64(std::string* out, uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  out->append(b, 8);
}

void PutString(std::string* out, std::string_view s) {
  PutU64(out, s.size());
  out->append(s);
}

// Reads what EncodeSample wrote, checking every length against what is left.
class Decoder {
 public:
  explicit Decoder(std::string_view bytes) : in_(bytes) {}
  bool U64(uint64_t* v) {
    if (in_.size() < 8) return false;
    std::memcpy(v, in_.data(), 8);
    in_.remove_prefix(8);
    return true;
  }
  bool String(std::string* s) {
    uint64_t n;
    if (!U64(&n) || n > in_.size()) return false;
    s->assign(in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }
  bool done() const { return in_.empty(); }

 private:
  std::string_view in_;
};

}  // namespace

void EncodeSample(const RawSample& s, std::string* out) {
  out->clear();
  PutString(out, s.key);
  PutString(out, s.source);
  PutString(out, s.path);
  PutString(out, s.tar_member);
  PutU64(out, static_cast<uint64_t>(s.tar_member_index));
  PutU64(out, s.captions.size());
  for (const std::string& c : s.captions) PutString(out, c);
  PutU64(out, s.fields.size());
  for (const FieldValue& f : s.fields) {
    PutU64(out, static_cast<uint64_t>(f.type));
    PutU64(out, static_cast<uint64_t>(f.i));
    uint64_t bits;
    std::memcpy(&bits, &f.f, 8);
    PutU64(out, bits);
    PutString(out, f.s);
  }
}

Status DecodeSample(std::string_view bytes, RawSample* s) {
  Decoder d(bytes);
  uint64_t v = 0, n = 0;
  bool ok = d.String(&s->key) && d.String(&s->source) && d.String(&s->path) &&
            d.String(&s->tar_member) && d.U64(&v);
  s->tar_member_index = static_cast<int64_t>(v);
  ok = ok && d.U64(&n) && n <= bytes.size();
  if (ok) {
    s->captions.resize(n);
    for (std::string& c : s->captions) ok = ok && d.String(&c);
  }
  ok = ok && d.U64(&n) && n <= bytes.size();
  if (ok) {
    s->fields.resize(n);
    for (FieldValue& f : s->fields) {
      uint64_t type = 0, i = 0, bits = 0;
      ok = ok && d.U64(&type) && d.U64(&i) && d.U64(&bits) && d.String(&f.s) &&
           type <= static_cast<uint64_t>(FieldValue::Type::kUint);
      f.type = static_cast<FieldValue::Type>(type);
      f.i = static_cast<int64_t>(i);
      std::memcpy(&f.f, &bits, 8);
    }
  }
  if (!ok || !d.done()) return Status::Corruption("a spilled sample is damaged");
  return Status::OK();
}

Result<std::unique_ptr<SampleList>> SampleList::Create(const std::filesystem::path& dir) {
  MM_ASSIGN_OR_RETURN(std::unique_ptr<SpillFile> file, SpillFile::Create(dir));
  return std::unique_ptr<SampleList>(new SampleList(dir, std::move(file)));
}

Status SampleList::Add(const RawSample& s) {
  EncodeSample(s, &scratch_);
  return AddEncoded(scratch_);
}

Status SampleList::AddEncoded(std::string_view bytes) {
  MM_ASSIGN_OR_RETURN(int64_t at, file_->Append(bytes));
  if (count_ % kIndexEvery == 0) offsets_.push_back(at);
  ++count_;
  return Status::OK();
}

Status SampleList::Finish() { return file_->Close(); }

Result<SampleList::Cursor> SampleList::From(size_t from) const {
  if (from > count_) return Status::Internal("SampleList::From past the end");
  const size_t block = from / kIndexEvery;
  Cursor c(file_->Read(block < offsets_.size() ? offsets_[block] : file_->size()),
           block * kIndexEvery, count_);
  RawSample skipped;
  while (c.next_ < from) {
    MM_ASSIGN_OR_RETURN(bool more, c.Next(&skipped));
    if (!more) return Status::Corruption("a spilled sample list ends early");
  }
  return c;
}

Result<bool> SampleList::Cursor::Next(RawSample* s) {
  if (next_ >= end_) return false;
  MM_ASSIGN_OR_RETURN(bool more, reader_.Next(&record_));
  if (!more) return Status::Corruption("a spilled sample list ends early");
  MM_RETURN_NOT_OK(DecodeSample(record_, s));
  ++next_;
  return true;
}

Status ForEachSample(const SampleList& list,
                     const std::function<Status(uint64_t at, RawSample& s)>& fn) {
  MM_ASSIGN_OR_RETURN(SampleList::Cursor c, list.From(0));
  RawSample s;
  for (;;) {
    const uint64_t at = c.position();
    MM_ASSIGN_OR_RETURN(bool more, c.Next(&s));
    if (!more) return Status::OK();
    MM_RETURN_NOT_OK(fn(at, s));
  }
}

}  // namespace mm::pack
