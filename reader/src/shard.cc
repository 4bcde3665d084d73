#include "shard.h"

#include <fcntl.h>
#include <hdf5.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <chrono>
#include <mutex>

#include "mm/format.h"
#include "mm/internal/checksum.h"
#include "mm/internal/h5.h"
#include "mm/internal/zstd_codec.h"

namespace mm::reader::internal {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the reader reads little-endian tables in place");

// HDF5 is called only from Open; one Open at a time keeps a non-thread-safe HDF5 build safe
// against concurrent ShardSet::Open calls.
std::mutex& H5Mutex() {
  static std::mutex m;
  return m;
}

// zstd's errors become a Status in mm/internal/zstd_codec.h.
Status ZstdDecode(const uint8_t* src, size_t size, uint8_t* dst, size_t expected,
                  const std::string& where) {
  return mm::zstd::Decompress(src, size, dst, expected).WithContext(where);
}

// Where a table lies: in the file (contiguous) or read into memory.
struct TablePlace {
  haddr_t offset = HADDR_UNDEF;
  uint64_t bytes = 0;  // elements * element size
  bool in_memory = false;
};

enum class Kind { kInt64, kInt32, kFixedString };

// Checks dataset `name`'s type and 1-D shape [expected_len], and finds where its bytes lie.
// A non-contiguous table is read into *memory.
Status LocateTable(hid_t file, const char* name, Kind kind, int64_t expected_len,
                   const std::string& shard, TablePlace* place, size_t* elem_size,
                   std::vector<uint8_t>* memory) {
  std::string where = shard + ": dataset '" + std::string(name) + "'";
  h5::Dataset d(H5Dopen2(file, name, H5P_DEFAULT));
  if (!d.valid()) return h5::ErrorFromStack(StatusCode::kCorruption, where + " missing");
  h5::Datatype t(H5Dget_type(d.get()));
  if (!t.valid()) return h5::ErrorFromStack(StatusCode::kCorruption, where + ": no type");
  H5T_class_t cls = H5Tget_class(t.get());
  size_t size = H5Tget_size(t.get());
  switch (kind) {
    case Kind::kInt64:
    case Kind::kInt32: {
      size_t want = kind == Kind::kInt64 ? 8 : 4;
      if (cls != H5T_INTEGER || size != want || H5Tget_order(t.get()) != H5T_ORDER_LE ||
          H5Tget_sign(t.get()) != H5T_SGN_2) {
        return Status::Corruption(where + " is not int" + std::to_string(want * 8) +
                                  " little-endian");
      }
      break;
    }
    case Kind::kFixedString:
      if (cls != H5T_STRING || H5Tis_variable_str(t.get()) != 0 || size == 0) {
        return Status::Corruption(where + " is not a fixed-length string");
      }
      break;
  }
  *elem_size = size;
  h5::Dataspace s(H5Dget_space(d.get()));
  if (!s.valid()) return h5::ErrorFromStack(StatusCode::kCorruption, where + ": no dataspace");
  int rank = H5Sget_simple_extent_ndims(s.get());
  hsize_t dims[1] = {0};
  if (rank != 1 || H5Sget_simple_extent_dims(s.get(), dims, nullptr) != 1) {
    return Status::Corruption(where + " is not one-dimensional");
  }
  if (static_cast<int64_t>(dims[0]) != expected_len) {
    return Status::Corruption(where + " has " + std::to_string(dims[0]) +
                              " elements, the index implies " + std::to_string(expected_len));
  }
  place->bytes = dims[0] * size;
  if (place->bytes == 0) return Status::OK();
  h5::PropList dcpl(H5Dget_create_plist(d.get()));
  if (dcpl.valid() && H5Pget_layout(dcpl.get()) == H5D_CONTIGUOUS) {
    place->offset = H5Dget_offset(d.get());
    if (place->offset == HADDR_UNDEF) {
      h5::ClearErrors();
      return Status::Corruption(where + " has no storage in the file");
    }
    return Status::OK();
  }
  // Not contiguous (compact or chunked): read it through HDF5 once.
  memory->resize(place->bytes);
  h5::Datatype mem(kind == Kind::kFixedString
                       ? H5Tcopy(t.get())
                       : H5Tcopy(kind == Kind::kInt64 ? H5T_STD_I64LE : H5T_STD_I32LE));
  if (H5Dread(d.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, memory->data()) < 0) {
    return h5::ErrorFromStack(StatusCode::kCorruption, where + ": read failed");
  }
  place->in_memory = true;
  return Status::OK();
}

// Everything Open learns through HDF5.
struct H5Layout {
  bool compressed = false;
  std::vector<uint64_t> chunk_offset;  // [N]
  std::vector<uint32_t> chunk_size;    // [N] stored bytes | Shard::kRawFlag
  TablePlace places[4];                // keys, caption_offsets, token_offsets, tokens
  size_t key_size = 0;
  std::vector<uint8_t> owned[4];  // tables read through HDF5 (not contiguous)
};

// Checks one chunk's (file offset, stored size) against the mapped file and the image size.
// `raw`: stored without the filter, so exactly image_bytes.
Status CheckChunk(const std::string& name, int64_t i, uint64_t addr, uint64_t size, bool raw,
                  const MappedFile& file, size_t image_bytes) {
  if (!file.Contains(addr, size) || size == 0) {
    return Status::Corruption(name + " sample " + std::to_string(i) + ": image chunk [" +
                              std::to_string(addr) + ", +" + std::to_string(size) +
                              ") lies outside the file (" + std::to_string(file.size()) +
                              " bytes)");
  }
  if (raw ? size != image_bytes : size > ZSTD_compressBound(image_bytes)) {
    return Status::Corruption(name + " sample " + std::to_string(i) + ": image chunk of " +
                              std::to_string(size) + " stored bytes cannot hold a " +
                              std::to_string(image_bytes) + "-byte image");
  }
  return Status::OK();
}

// Opens the shard with HDF5, checks the images dataset and the tables, and records where
// everything lies; closes HDF5 before returning. Checks chunk ranges against `file`.
Status QueryLayout(const std::string& path, const std::string& name, const ShardEntry& entry,
                   const SetInfo& info, const MappedFile& file, size_t image_bytes, H5Layout* out) {
  size_t elem = 0;
  bool& compressed = out->compressed;
  {
    h5::SilenceErrors();
    h5::File f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    if (!f.valid())
      return h5::ErrorFromStack(StatusCode::kCorruption, name + ": not a readable HDF5 file");

    // The shard's own format_version attribute is not read: index.json's version is checked,
    // and parsing attribute messages of a damaged file is where HDF5 1.10.8 itself crashed
    // (found by tests/reader/fuzz_shard.cc); the fewer HDF5 calls on untrusted bytes the better.

    // images: type, shape, chunking, filter.
    const std::string where = name + ": dataset 'images'";
    h5::Dataset img(H5Dopen2(f.get(), mm::format::kImages, H5P_DEFAULT));
    if (!img.valid()) return h5::ErrorFromStack(StatusCode::kCorruption, where + " missing");
    h5::Datatype t(H5Dget_type(img.get()));
    if (!t.valid() || H5Tget_class(t.get()) != H5T_INTEGER || H5Tget_size(t.get()) != 1) {
      h5::ClearErrors();
      return Status::Corruption(where + " is not uint8");
    }
    h5::Dataspace s(H5Dget_space(img.get()));
    hsize_t dims[4] = {0, 0, 0, 0};
    if (!s.valid() || H5Sget_simple_extent_ndims(s.get()) != 4 ||
        H5Sget_simple_extent_dims(s.get(), dims, nullptr) != 4) {
      h5::ClearErrors();
      return Status::Corruption(where + " is not four-dimensional");
    }
    if (static_cast<int64_t>(dims[0]) != entry.samples ||
        dims[1] != static_cast<hsize_t>(info.image_height) ||
        dims[2] != static_cast<hsize_t>(info.image_width) || dims[3] != 3) {
      return Status::Corruption(
          where + " has shape [" + std::to_string(dims[0]) + ", " + std::to_string(dims[1]) + ", " +
          std::to_string(dims[2]) + ", " + std::to_string(dims[3]) + "], index.json implies [" +
          std::to_string(entry.samples) + ", " + std::to_string(info.image_height) + ", " +
          std::to_string(info.image_width) + ", 3]");
    }
    h5::PropList dcpl(H5Dget_create_plist(img.get()));
    hsize_t chunk[4] = {0, 0, 0, 0};
    if (!dcpl.valid() || H5Pget_layout(dcpl.get()) != H5D_CHUNKED ||
        H5Pget_chunk(dcpl.get(), 4, chunk) != 4 || chunk[0] != 1 || chunk[1] != dims[1] ||
        chunk[2] != dims[2] || chunk[3] != 3) {
      h5::ClearErrors();
      return Status::Corruption(where + " is not chunked one image per chunk");
    }
    int nfilters = H5Pget_nfilters(dcpl.get());
    if (nfilters < 0)
      return h5::ErrorFromStack(StatusCode::kCorruption, where + ": filter pipeline");
    if (nfilters > 1) {
      return Status::Unsupported(where + " has " + std::to_string(nfilters) +
                                 " filters; this reader reads zstd (32015) or none");
    }
    if (nfilters == 1) {
      unsigned flags = 0;
      size_t ncd = 0;
      unsigned filter_config = 0;
      H5Z_filter_t id =
          H5Pget_filter2(dcpl.get(), 0, &flags, &ncd, nullptr, 0, nullptr, &filter_config);
      if (id != mm::format::kZstdFilterId) {
        h5::ClearErrors();
        return Status::Unsupported(where + " uses HDF5 filter " + std::to_string(id) +
                                   "; this reader reads zstd (32015) or none");
      }
      compressed = true;
    }
    if (compressed != (info.compression == "zstd")) {
      return Status::Corruption(where + (compressed ? " is zstd-compressed" : " is uncompressed") +
                                " but index.json says compression \"" + info.compression + "\"");
    }

    // The chunk table: one chunk per sample, each inside the file.
    hsize_t nchunks = 0;
    if (H5Dget_num_chunks(img.get(), s.get(), &nchunks) < 0) {
      return h5::ErrorFromStack(StatusCode::kCorruption, where + ": cannot count chunks");
    }
    if (static_cast<int64_t>(nchunks) != entry.samples) {
      return Status::Corruption(where + " has " + std::to_string(nchunks) + " chunks for " +
                                std::to_string(entry.samples) + " samples");
    }
    out->chunk_offset.resize(entry.samples);
    out->chunk_size.resize(entry.samples);
    for (int64_t i = 0; i < entry.samples; ++i) {
      hsize_t coord[4] = {static_cast<hsize_t>(i), 0, 0, 0};
      unsigned mask = 0;
      haddr_t addr = HADDR_UNDEF;
      hsize_t size = 0;
      if (H5Dget_chunk_info_by_coord(img.get(), coord, &mask, &addr, &size) < 0) {
        return h5::ErrorFromStack(StatusCode::kCorruption,
                                  name + " sample " + std::to_string(i) + ": chunk query failed");
      }
      if (addr == HADDR_UNDEF) {
        return Status::Corruption(name + " sample " + std::to_string(i) +
                                  ": image chunk missing");
      }
      bool raw = !compressed || (mask & 1u);
      MM_RETURN_NOT_OK(CheckChunk(name, i, addr, size, raw, file, image_bytes));
      out->chunk_offset[i] = addr;
      out->chunk_size[i] = static_cast<uint32_t>(size) | (raw ? Shard::kRawFlag : 0u);
    }

    // The small tables.
    MM_RETURN_NOT_OK(LocateTable(f.get(), mm::format::kKeys, Kind::kFixedString, entry.samples,
                                 name, &out->places[0], &out->key_size, &out->owned[0]));
    MM_RETURN_NOT_OK(LocateTable(f.get(), mm::format::kCaptionOffsets, Kind::kInt64,
                                 entry.samples + 1, name, &out->places[1], &elem, &out->owned[1]));
    MM_RETURN_NOT_OK(LocateTable(f.get(), mm::format::kTokenOffsets, Kind::kInt64,
                                 entry.captions + 1, name, &out->places[2], &elem, &out->owned[2]));
    MM_RETURN_NOT_OK(LocateTable(f.get(), mm::format::kTokens, Kind::kInt32, entry.tokens, name,
                                 &out->places[3], &elem, &out->owned[3]));
  }
  return Status::OK();
}

// QueryLayout in this process, one thread at a time.
Status QueryLayoutLocked(const std::string& path, const std::string& name, const ShardEntry& entry,
                         const SetInfo& info, const MappedFile& file, size_t image_bytes,
                         H5Layout* out) {
  std::lock_guard<std::mutex> lock(H5Mutex());
  return QueryLayout(path, name, entry, info, file, image_bytes, out);
}

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
Status CheckAnswer(const std::string& name, const ShardEntry& entry, const MappedFile& file,
                   size_t image_bytes, const H5Layout& a) {
  const std::string bad = name + ": malformed answer from the HDF5 query process: ";
  if (a.chunk_offset.size() != static_cast<size_t>(entry.samples) ||
      a.chunk_size.size() != static_cast<size_t>(entry.samples)) {
    return Status::Corruption(bad + "chunk table of " + std::to_string(a.chunk_offset.size()) +
                              " entries for " + std::to_string(entry.samples) + " samples");
  }
  for (int64_t i = 0; i < entry.samples; ++i) {
    const bool raw = (a.chunk_size[i] & Shard::kRawFlag) != 0;
    if (!a.compressed && !raw) return Status::Corruption(bad + "filtered chunk, no filter");
    MM_RETURN_NOT_OK(CheckChunk(name, i, a.chunk_offset[i], a.chunk_size[i] & Shard::kSizeMask,
                                raw, file, image_bytes));
  }
  if (a.key_size == 0) return Status::Corruption(bad + "key size 0");
  // keys, caption_offsets, token_offsets, tokens: elements * element size.
  const uint64_t expected[4] = {static_cast<uint64_t>(entry.samples) * a.key_size,
                                static_cast<uint64_t>(entry.samples + 1) * 8,
                                static_cast<uint64_t>(entry.captions + 1) * 8,
                                static_cast<uint64_t>(entry.tokens) * 4};
  for (int k = 0; k < 4; ++k) {
    const TablePlace& p = a.places[k];
    if (p.bytes != expected[k] || a.owned[k].size() != (p.in_memory ? p.bytes : 0)) {
      return Status::Corruption(bad + "table " + std::to_string(k) + " of " +
                                std::to_string(p.bytes) + " bytes, expected " +
                                std::to_string(expected[k]));
    }
  }
  return Status::OK();
}

// The child's side: query, write the answer, leave without running atexit handlers.
[[noreturn]] void AnswerInChild(int fd, void (*hook)(), const std::string& path,
                                const std::string& name, const ShardEntry& entry,
                                const SetInfo& info, const MappedFile& file, size_t image_bytes) {
  if (hook) hook();
  H5Layout layout;
  Status st = QueryLayout(path, name, entry, info, file, image_bytes, &layout);
  Wire w;
  w.Pod<int32_t>(static_cast<int32_t>(st.code()));
  w.Str(st.message());
  if (st.ok()) {
    w.Pod<uint8_t>(layout.compressed);
    w.Vec(layout.chunk_offset);
    w.Vec(layout.chunk_size);
    for (const TablePlace& p : layout.places) w.Pod(p);
    w.Pod<uint64_t>(layout.key_size);
    for (const auto& o : layout.owned) w.Vec(o);
  }
  const char* p = w.bytes.data();
  size_t left = w.bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(3);
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::_exit(0);
}

// QueryLayout in a forked child; its answer comes back through a pipe. A crash (or sanitizer
// abort) inside libhdf5 ends the child, not the caller, and becomes a Corruption error; so does
// a child that does not answer within the deadline (it is killed).
Status QueryLayoutIsolated(const std::string& path, const std::string& name,
                           const ShardEntry& entry, const SetInfo& info, const MappedFile& file,
                           size_t image_bytes, H5Layout* out) {
  const IsolatedQueryTestHooks hooks = IsolatedQueryHooksForTesting();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return Status::IOError(name + ": pipe: " + std::strerror(errno));
  }
  pid_t pid;
  {
    // No other thread of ours is inside HDF5 while the child's copy of it is taken (other
    // threads of the process that call HDF5 directly are not covered: see reader.h).
    std::lock_guard<std::mutex> lock(H5Mutex());
    pid = ::fork();
  }
  if (pid < 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::IOError(name + ": fork: " + std::strerror(err));
  }
  if (pid == 0) {
    ::close(fds[0]);
    AnswerInChild(fds[1], hooks.in_child, path, name, entry, info, file, image_bytes);
  }
  ::close(fds[1]);

  // Read until EOF or the deadline.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(hooks.timeout_ms);
  Wire w;
  char buf[1 << 16];
  bool timed_out = false;
  int read_errno = 0;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      read_errno = errno;
      break;
    }
    if (r == 0) continue;  // the loop re-checks the deadline
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      read_errno = errno;
      break;
    }
    if (n == 0) break;  // EOF: the child wrote everything and exited (or died)
    w.bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out || read_errno != 0) ::kill(pid, SIGKILL);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Status::Corruption(name + ": HDF5 metadata query timed out after " +
                              std::to_string(hooks.timeout_ms) +
                              " ms (query process killed; was another thread of this process "
                              "inside HDF5? see OpenOptions::isolate_hdf5)");
  }
  if (read_errno != 0) {
    return Status::IOError(name + ": reading the HDF5 query's answer: " +
                           std::strerror(read_errno));
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return Status::Corruption(
        name + ": libhdf5 " +
        (WIFSIGNALED(wstatus)
             ? "crashed (signal " + std::to_string(WTERMSIG(wstatus)) + ")"
             : "failed (exit status " + std::to_string(WEXITSTATUS(wstatus)) + ")") +
        " reading the shard's metadata");
  }
  int32_t code = 0;
  std::string message;
  if (!w.GetPod(&code) || !w.GetStr(&message) || code < 0 ||
      code > static_cast<int32_t>(StatusCode::kOutOfRange)) {
    return Status::Corruption(name + ": malformed answer from the HDF5 query process");
  }
  if (code != 0) return Status(static_cast<StatusCode>(code), message);
  uint8_t compressed = 0;
  uint64_t key_size = 0;
  w.GetPod(&compressed);
  w.GetVec(&out->chunk_offset);
  w.GetVec(&out->chunk_size);
  for (TablePlace& p : out->places) w.GetPod(&p);
  w.GetPod(&key_size);
  for (auto& o : out->owned) w.GetVec(&o);
  if (!w.ok || w.pos != w.bytes.size()) {
    return Status::Corruption(name + ": malformed answer from the HDF5 query process");
  }
  out->compressed = compressed != 0;
  out->key_size = key_size;
  return CheckAnswer(name, entry, file, image_bytes, *out);
}

}  // namespace

IsolatedQueryTestHooks& IsolatedQueryHooksForTesting() {
  static IsolatedQueryTestHooks hooks;
  return hooks;
}

Result<std::unique_ptr<Shard>> Shard::Open(const std::string& path, const ShardEntry& entry,
                                           const SetInfo& info, const OpenOptions& options) {
  const bool verify_checksum = options.verify_checksums;
  std::unique_ptr<Shard> shard(new Shard());
  shard->name_ = entry.file;
  const std::string& name = shard->name_;
  const size_t image_bytes =
      static_cast<size_t>(info.image_height) * info.image_width * info.channels;
  if (image_bytes >= Shard::kSizeMask) {
    return Status::Unsupported(name + ": images of " + std::to_string(image_bytes) +
                               " bytes are too large for this reader");
  }
  shard->image_bytes_ = image_bytes;
  shard->num_samples_ = entry.samples;
  shard->num_captions_ = entry.captions;

  // Size first: a truncated shard fails before HDF5 parses anything.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    std::string msg = name + ": " + std::strerror(err);
    return err == ENOENT ? Status::NotFound(msg) : Status::IOError(msg);
  }
  if (static_cast<int64_t>(st.st_size) != entry.bytes) {
    return Status::Corruption(name + ": file is " + std::to_string(st.st_size) +
                              " bytes, index.json says " + std::to_string(entry.bytes) +
                              (st.st_size < entry.bytes ? " (truncated)" : ""));
  }
  MM_ASSIGN_OR_RETURN(shard->file_, MappedFile::Open(path));
  const MappedFile& file = *shard->file_;
  if (file.size() != static_cast<uint64_t>(entry.bytes)) {
    return Status::Corruption(name + ": file changed size while opening");
  }
  if (verify_checksum) {
    const std::string hash = mm::Xxh3Hex(file.data(), file.size());
    if (hash != entry.xxh3_64) {
      return Status::Corruption(name + ": XXH3-64 is " + hash + ", index.json says \"" +
                                entry.xxh3_64 + "\"");
    }
  }

  H5Layout layout;
  MM_RETURN_NOT_OK(options.isolate_hdf5
                       ? QueryLayoutIsolated(path, name, entry, info, file, image_bytes, &layout)
                       : QueryLayoutLocked(path, name, entry, info, file, image_bytes, &layout));
  for (int k = 0; k < 4; ++k) shard->owned_[k] = std::move(layout.owned[k]);
  shard->chunk_offset_ = std::move(layout.chunk_offset);
  shard->chunk_size_ = std::move(layout.chunk_size);
  const TablePlace &keys = layout.places[0], &cap_off = layout.places[1],
                   &tok_off = layout.places[2], &toks = layout.places[3];
  const size_t key_size = layout.key_size;
  // From here on HDF5 is closed and only the mapping is read.

  // Each table inside the file, then pointers into the mapping (or the in-memory copy).
  auto place = [&](const TablePlace& p, const char* what, int k, const uint8_t** out) -> Status {
    if (p.in_memory) {
      *out = shard->owned_[k].data();
      return Status::OK();
    }
    if (p.bytes == 0) {
      *out = nullptr;
      return Status::OK();
    }
    if (!file.Contains(p.offset, p.bytes)) {
      return Status::Corruption(name + ": dataset '" + what + "' [" + std::to_string(p.offset) +
                                ", +" + std::to_string(p.bytes) + ") lies outside the file (" +
                                std::to_string(file.size()) + " bytes)");
    }
    *out = file.data() + p.offset;
    return Status::OK();
  };
  const uint8_t* tokens_bytes = nullptr;
  MM_RETURN_NOT_OK(place(keys, mm::format::kKeys, 0, &shard->keys_));
  MM_RETURN_NOT_OK(place(cap_off, mm::format::kCaptionOffsets, 1, &shard->caption_offsets_));
  MM_RETURN_NOT_OK(place(tok_off, mm::format::kTokenOffsets, 2, &shard->token_offsets_));
  MM_RETURN_NOT_OK(place(toks, mm::format::kTokens, 3, &tokens_bytes));
  shard->key_size_ = key_size;
  if (tokens_bytes && reinterpret_cast<uintptr_t>(tokens_bytes) % alignof(int32_t) != 0) {
    // int32 views need alignment; HDF5 does not align datasets by default. Copy (rare).
    shard->owned_[3].assign(tokens_bytes, tokens_bytes + toks.bytes);
    tokens_bytes = shard->owned_[3].data();
  }
  shard->tokens_ = reinterpret_cast<const int32_t*>(tokens_bytes);

  // Offsets: start at 0, increase, end at the index's counts.
  const int64_t n = entry.samples, c = entry.captions, tcount = entry.tokens;
  int64_t prev = LoadI64(shard->caption_offsets_, 0);
  if (prev != 0) return Status::Corruption(name + ": caption_offsets[0] = " + std::to_string(prev));
  for (int64_t i = 1; i <= n; ++i) {
    int64_t cur = LoadI64(shard->caption_offsets_, i);
    if (cur <= prev || cur > c) {
      return Status::Corruption(name + " sample " + std::to_string(i - 1) + ": caption_offsets " +
                                std::to_string(prev) + " -> " + std::to_string(cur) +
                                " (must increase, within " + std::to_string(c) + " captions)");
    }
    prev = cur;
  }
  if (prev != c) {
    return Status::Corruption(name + ": caption_offsets ends at " + std::to_string(prev) +
                              ", index.json says " + std::to_string(c) + " captions");
  }
  prev = LoadI64(shard->token_offsets_, 0);
  if (prev != 0) return Status::Corruption(name + ": token_offsets[0] = " + std::to_string(prev));
  for (int64_t i = 1; i <= c; ++i) {
    int64_t cur = LoadI64(shard->token_offsets_, i);
    if (cur < prev || cur > tcount || cur - prev > std::numeric_limits<int32_t>::max()) {
      return Status::Corruption(name + " caption " + std::to_string(i - 1) + ": token_offsets " +
                                std::to_string(prev) + " -> " + std::to_string(cur) +
                                " (must not decrease, within " + std::to_string(tcount) +
                                " tokens)");
    }
    prev = cur;
  }
  if (prev != tcount) {
    return Status::Corruption(name + ": token_offsets ends at " + std::to_string(prev) +
                              ", index.json says " + std::to_string(tcount) + " tokens");
  }
  return shard;
}

int64_t Shard::SampleOfCaption(int64_t c) const {
  // Largest s with caption_offsets[s] <= c.
  int64_t lo = 0, hi = num_samples_;  // invariant: offsets[lo] <= c < offsets[hi]
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if (LoadI64(caption_offsets_, mid) <= c)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

Status Shard::ReadImage(int64_t s, uint8_t* dst) const {
  if (s < 0 || s >= num_samples_) {
    return Status::OutOfRange(name_ + " sample " + std::to_string(s) + " of " +
                              std::to_string(num_samples_));
  }
  const uint8_t* src = file_->data() + chunk_offset_[s];
  uint32_t stored = chunk_size_[s];
  if (stored & kRawFlag) {
    std::memcpy(dst, src, image_bytes_);
    return Status::OK();
  }
  return ZstdDecode(src, stored & kSizeMask, dst, image_bytes_,
                    name_ + " sample " + std::to_string(s));
}

std::string_view Shard::StoredChunk(int64_t s, bool* compressed) const {
  *compressed = !(chunk_size_[s] & kRawFlag);
  return std::string_view(reinterpret_cast<const char*>(file_->data() + chunk_offset_[s]),
                          chunk_size_[s] & kSizeMask);
}

}  // namespace mm::reader::internal
