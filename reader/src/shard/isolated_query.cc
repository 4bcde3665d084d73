// isolated_query.cc: the shard's HDF5 query in a short-lived forked child (OpenOptions::
// isolate_hdf5): a crash (or sanitizer abort) inside libhdf5 on hostile metadata ends the child,
// not the caller, and becomes a Corruption error; so does a child that does not answer within
// the deadline. The answer comes back through a pipe (mm/internal/run_in_child.h) and is
// re-checked before use.
#include <sys/wait.h>

#include <cstring>
#include <string>
#include <utility>

#include "mm/internal/run_in_child.h"
#include "mm/internal/set_rules.h"
#include "shard/shard_layout.h"

namespace mm::reader::internal {
namespace {

// A byte stream for the child's answer: POD values and vectors, length-prefixed.
struct Wire {
  std::string bytes;
  size_t pos = 0;
  bool ok = true;

  void Put(const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); }
  template <typename T>
  void Pod(const T& v) {
    Put(&v, sizeof(T));
  }
  template <typename T>
  void Vec(const std::vector<T>& v) {
    Pod<uint64_t>(v.size());
    if (!v.empty()) Put(v.data(), v.size() * sizeof(T));
  }
  void Str(const std::string& s) {
    Pod<uint64_t>(s.size());
    Put(s.data(), s.size());
  }
  bool Get(void* p, size_t n) {
    if (!ok || n > bytes.size() - pos) return ok = false;
    std::memcpy(p, bytes.data() + pos, n);
    pos += n;
    return true;
  }
  template <typename T>
  bool GetPod(T* v) {
    return Get(v, sizeof(T));
  }
  template <typename T>
  bool GetVec(std::vector<T>* v) {
    uint64_t n = 0;
    if (!GetPod(&n) || n > (bytes.size() - pos) / sizeof(T)) return ok = false;
    v->resize(n);
    return n == 0 || Get(v->data(), n * sizeof(T));
  }
  bool GetStr(std::string* s) {
    uint64_t n = 0;
    if (!GetPod(&n) || n > bytes.size() - pos) return ok = false;
    s->assign(bytes.data() + pos, n);
    pos += n;
    return true;
  }
};

// Re-checks an answer from the forked query as QueryLayout checks its own: the child ran
// libhdf5 on untrusted bytes, so its answer is not trusted either. Table ranges in the file
// are checked by Shard::Open for both paths.
Status CheckAnswer(const ShardQuery& q, const ShardLayout& a) {
  const ShardEntry& entry = *q.entry;
  const std::string bad = q.name + ": malformed answer from the HDF5 query process: ";
  if (a.chunk_offset.size() != static_cast<size_t>(entry.samples) ||
      a.chunk_size.size() != static_cast<size_t>(entry.samples)) {
    return Status::Corruption(bad + "chunk table of " + std::to_string(a.chunk_offset.size()) +
                              " entries for " + std::to_string(entry.samples) + " samples");
  }
  for (int64_t i = 0; i < entry.samples; ++i) {
    const bool raw = (a.chunk_size[i] & kRawChunkFlag) != 0;
    if (!a.compressed && !raw) return Status::Corruption(bad + "filtered chunk, no filter");
    MM_RETURN_NOT_OK(CheckChunk(q, i, a.chunk_offset[i], a.chunk_size[i] & kChunkSizeMask, raw));
  }
  if (a.jpeg != q.jpeg) return Status::Corruption(bad + "image codec unlike index.json's");
  if (a.jpeg) {
    if (a.image_size.size() != 2 * static_cast<size_t>(entry.samples)) {
      return Status::Corruption(bad + "image_size of " + std::to_string(a.image_size.size()) +
                                " values");
    }
    MM_RETURN_NOT_OK(CheckImageSizes(q.name, a.image_size.data(), entry.samples, *q.info));
  }
  if (a.key_size == 0) return Status::Corruption(bad + "key size 0");
  // keys, caption_offsets, token_offsets, tokens: elements * element size.
  const uint64_t expected[kNumTables] = {static_cast<uint64_t>(entry.samples) * a.key_size,
                                         static_cast<uint64_t>(entry.samples + 1) * 8,
                                         static_cast<uint64_t>(entry.captions + 1) * 8,
                                         static_cast<uint64_t>(entry.tokens) * 4};
  for (int k = 0; k < kNumTables; ++k) {
    const TablePlace& p = a.places[k];
    if (p.bytes != expected[k] || a.owned[k].size() != (p.in_memory ? p.bytes : 0)) {
      return Status::Corruption(bad + "table " + std::to_string(k) + " of " +
                                std::to_string(p.bytes) + " bytes, expected " +
                                std::to_string(expected[k]));
    }
  }
  return Status::OK();
}

// The answer's wire form, written by the child and read by the parent: the Status (code,
// message), then on success the layout, field by field.
void EncodeAnswer(const Status& st, const ShardLayout& layout, Wire* w) {
  w->Pod<int32_t>(static_cast<int32_t>(st.code()));
  w->Str(st.message());
  if (!st.ok()) return;
  w->Pod<uint8_t>(layout.compressed);
  w->Pod<uint8_t>(layout.jpeg);
  w->Vec(layout.image_size);
  w->Vec(layout.chunk_offset);
  w->Vec(layout.chunk_size);
  for (const TablePlace& p : layout.places) {
    w->Pod<uint64_t>(p.offset);
    w->Pod<uint64_t>(p.bytes);
    w->Pod<uint8_t>(p.in_memory);
  }
  w->Pod<uint64_t>(layout.key_size);
  for (const auto& o : layout.owned) w->Vec(o);
}

Status DecodeAnswer(const ShardQuery& q, Wire* w, ShardLayout* out) {
  const Status malformed =
      Status::Corruption(q.name + ": malformed answer from the HDF5 query process");
  int32_t code = 0;
  std::string message;
  if (!w->GetPod(&code) || !w->GetStr(&message) || code < 0 ||
      code > static_cast<int32_t>(StatusCode::kOutOfRange)) {
    return malformed;
  }
  if (code != 0) return Status(static_cast<StatusCode>(code), message);
  uint8_t compressed = 0, in_memory = 0, jpeg = 0;
  uint64_t key_size = 0;
  w->GetPod(&compressed);
  w->GetPod(&jpeg);
  w->GetVec(&out->image_size);
  w->GetVec(&out->chunk_offset);
  w->GetVec(&out->chunk_size);
  for (TablePlace& p : out->places) {
    w->GetPod(&p.offset);
    w->GetPod(&p.bytes);
    w->GetPod(&in_memory);
    p.in_memory = in_memory != 0;
  }
  w->GetPod(&key_size);
  for (auto& o : out->owned) w->GetVec(&o);
  if (!w->ok || w->pos != w->bytes.size()) return malformed;
  out->compressed = compressed != 0;
  out->jpeg = jpeg != 0;
  out->key_size = key_size;
  return CheckAnswer(q, *out);
}

// How the child ended as a Status (OK: it exited normally after answering).
Status ChildEnd(const std::string& name, const ChildRun& run, int timeout_ms) {
  if (run.timed_out) {
    return Status::Corruption(name + ": HDF5 metadata query timed out after " +
                              std::to_string(timeout_ms) +
                              " ms (query process killed; was another thread of this process "
                              "inside HDF5? see OpenOptions::isolate_hdf5)");
  }
  if (run.read_error != 0) {
    return Status::IOError(name +
                           ": reading the HDF5 query's answer: " + std::strerror(run.read_error));
  }
  const int wstatus = run.wait_status;
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return Status::Corruption(
        name + ": libhdf5 " +
        (WIFSIGNALED(wstatus)
             ? "crashed (signal " + std::to_string(WTERMSIG(wstatus)) + ")"
             : "failed (exit status " + std::to_string(WEXITSTATUS(wstatus)) + ")") +
        " reading the shard's metadata");
  }
  return Status::OK();
}

}  // namespace

IsolatedQueryTestHooks& IsolatedQueryHooksForTesting() {
  static IsolatedQueryTestHooks hooks;
  return hooks;
}

// QueryLayout in a forked child; its answer comes back through a pipe. A crash (or sanitizer
// abort) inside libhdf5 ends the child, not the caller, and becomes a Corruption error; so does
// a child that does not answer within the deadline (it is killed).
Status QueryLayoutIsolated(const ShardQuery& q, ShardLayout* out) {
  const IsolatedQueryTestHooks hooks = IsolatedQueryHooksForTesting();
  // No other thread of ours is inside HDF5 while the child's copy of it is taken (other
  // threads of the process that call HDF5 directly are not covered: see reader.h).
  MM_ASSIGN_OR_RETURN(ChildRun run, RunInChild(q.name, hooks.timeout_ms, &Hdf5Mutex(), [&] {
                        if (hooks.in_child) hooks.in_child();
                        ShardLayout layout;
                        Wire w;
                        EncodeAnswer(QueryLayout(q, &layout), layout, &w);
                        return std::move(w.bytes);
                      }));
  MM_RETURN_NOT_OK(ChildEnd(q.name, run, hooks.timeout_ms));
  Wire wire;
  wire.bytes = std::move(run.answer);
  return DecodeAnswer(q, &wire, out);
}

}  // namespace mm::reader::internal
