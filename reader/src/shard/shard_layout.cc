// shard_layout.cc: the HDF5 half of opening a shard (see shard_layout.h): the images dataset's
// type, shape, chunking and filter; its chunk table from the chunk index walk, cross-checked
// against HDF5; the small tables' types, lengths and places.
#include "shard/shard_layout.h"

#include <hdf5.h>
#include <zstd.h>

#include "mm/format.h"
#include "mm/internal/h5.h"
#include "mm/internal/set_rules.h"
#include "shard/chunk_index.h"

namespace mm::reader::internal {
namespace {

// Checks `images`' type and shape: uint8 [N, H, W, 3] as index.json says; sets dims.
Status CheckImagesShape(const ShardQuery& q, hid_t img, const std::string& where, hsize_t dims[4]) {
  h5::Datatype t(H5Dget_type(img));
  MM_RETURN_NOT_OK(CheckTableType(t.get(), TableType::kUint8, where));
  h5::Dataspace s(H5Dget_space(img));
  if (!s.valid() || H5Sget_simple_extent_ndims(s.get()) != 4 ||
      H5Sget_simple_extent_dims(s.get(), dims, nullptr) != 4) {
    h5::ClearErrors();
    return Status::Corruption(where + " is not four-dimensional");
  }
  const SetInfo& info = *q.info;
  if (static_cast<int64_t>(dims[0]) != q.entry->samples ||
      dims[1] != static_cast<hsize_t>(info.image_height) ||
      dims[2] != static_cast<hsize_t>(info.image_width) || dims[3] != 3) {
    return Status::Corruption(
        where + " has shape [" + std::to_string(dims[0]) + ", " + std::to_string(dims[1]) + ", " +
        std::to_string(dims[2]) + ", " + std::to_string(dims[3]) + "], index.json implies [" +
        std::to_string(q.entry->samples) + ", " + std::to_string(info.image_height) + ", " +
        std::to_string(info.image_width) + ", 3]");
  }
  return Status::OK();
}

// Checks `images`' filter pipeline: zstd (32015) or none, as index.json says.
Status CheckImagesFilter(const ShardQuery& q, hid_t dcpl, const std::string& where,
                         bool* compressed) {
  const int nfilters = H5Pget_nfilters(dcpl);
  if (nfilters < 0 || nfilters > 1) {
    h5::ClearErrors();
    return Status::Unsupported(where + " has " + std::to_string(nfilters) +
                               " filters; this reader reads zstd (32015) or none");
  }
  *compressed = false;
  if (nfilters == 1) {
    unsigned flags = 0, filter_config = 0;
    size_t ncd = 0;
    H5Z_filter_t id = H5Pget_filter2(dcpl, 0, &flags, &ncd, nullptr, 0, nullptr, &filter_config);
    if (id != mm::format::kZstdFilterId) {
      h5::ClearErrors();
      return Status::Unsupported(where + " uses HDF5 filter " + std::to_string(id) +
                                 "; this reader reads zstd (32015) or none");
    }
    *compressed = true;
  }
  const mm::format::Codec codec = q.info->compression;
  if (*compressed != (codec == mm::format::Codec::kZstd)) {
    return Status::Corruption(where + (*compressed ? " is zstd-compressed" : " is uncompressed") +
                              " but index.json says compression \"" +
                              std::string(mm::format::ToString(codec)) + "\"");
  }
  return Status::OK();
}

// Checks `images`: type and shape, chunked [1, H, W, 3], its filter. Sets *compressed.
Status CheckImages(const ShardQuery& q, hid_t img, bool* compressed) {
  const std::string where = q.name + ": dataset 'images'";
  hsize_t dims[4] = {0, 0, 0, 0};
  MM_RETURN_NOT_OK(CheckImagesShape(q, img, where, dims));
  h5::PropList dcpl(H5Dget_create_plist(img));
  hsize_t chunk[4] = {0, 0, 0, 0};
  if (!dcpl.valid() || H5Pget_layout(dcpl.get()) != H5D_CHUNKED ||
      H5Pget_chunk(dcpl.get(), 4, chunk) != 4 || chunk[0] != 1 || chunk[1] != dims[1] ||
      chunk[2] != dims[2] || chunk[3] != 3) {
    h5::ClearErrors();
    return Status::Corruption(where + " is not chunked one image per chunk");
  }
  return CheckImagesFilter(q, dcpl.get(), where, compressed);
}

// What HDF5 says of the file and of images' object header, to start the chunk index walk.
Result<ChunkIndexHints> IndexHints(const ShardQuery& q, hid_t file, hid_t img) {
  ChunkIndexHints h;
  h5::PropList fcpl(H5Fget_create_plist(file));
  size_t sizeof_addr = 0, sizeof_size = 0;
  hsize_t userblock = 0;
  H5O_info_t oinfo;
  if (!fcpl.valid() || H5Pget_sizes(fcpl.get(), &sizeof_addr, &sizeof_size) < 0 ||
      H5Pget_istore_k(fcpl.get(), &h.btree_k) < 0 || H5Pget_userblock(fcpl.get(), &userblock) < 0 ||
      H5Oget_info2(img, &oinfo, H5O_INFO_BASIC) < 0) {
    return h5::ErrorFromStack(StatusCode::kCorruption, q.name + ": file creation properties");
  }
  if (userblock != 0) {
    // HDF5 1.10.8 reports offsets in such files inconsistently (measured: H5Dget_chunk_info
    // relative to the user block's end, H5Dget_offset one user block too far); mmpack writes none.
    return Status::Unsupported(q.name + ": has a user block of " + std::to_string(userblock) +
                               " bytes; this reader reads shards without one");
  }
  h.sizeof_addr = static_cast<unsigned>(sizeof_addr);
  h.sizeof_size = static_cast<unsigned>(sizeof_size);
  h.userblock = userblock;
  h.header_address = oinfo.addr;
  return h;
}

// The slow way, for a chunk index other than the v1 B-tree: one H5Dget_chunk_info_by_coord per
// chunk, each a pass over the whole index in HDF5 1.10.8. Bounded by kMaxChunksQueriedOneByOne.
Result<std::vector<ChunkRecord>> QueryChunksOneByOne(const ShardQuery& q, hid_t img,
                                                     const Status& why) {
  const int64_t n = q.entry->samples;
  if (n > kMaxChunksQueriedOneByOne) {
    return Status::Unsupported(q.name + ": dataset 'images': " + why.message() + "; this reader " +
                               "reads other chunk indexes only up to " +
                               std::to_string(kMaxChunksQueriedOneByOne) + " chunks (" +
                               std::to_string(n) + " here; write shards with libver earliest, " +
                               "as mmpack build does)");
  }
  std::vector<ChunkRecord> records(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    hsize_t coord[4] = {static_cast<hsize_t>(i), 0, 0, 0};
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(img, coord, &mask, &addr, &size) < 0) {
      return h5::ErrorFromStack(StatusCode::kCorruption,
                                q.name + " sample " + std::to_string(i) + ": chunk query failed");
    }
    if (addr == HADDR_UNDEF || size > kChunkSizeMask) {
      return Status::Corruption(q.name + " sample " + std::to_string(i) + ": image chunk missing");
    }
    records[i] = ChunkRecord{addr, static_cast<uint32_t>(size), mask};
  }
  return records;
}

// HDF5's own view of what the walk found, checked cheaply: its chunk count (H5Dget_num_chunks:
// a pass over the index), every chunk's stored size through HDF5's index lookup
// (H5Dget_chunk_storage_size: one B-tree search each, 0.05 s for 100k chunks), and the first
// and last chunk's whole record (H5Dget_chunk_info_by_coord: a pass over the index each).
Status CrossCheck(const ShardQuery& q, hid_t img, const std::vector<ChunkRecord>& records) {
  const int64_t n = static_cast<int64_t>(records.size());
  h5::Dataspace space(H5Dget_space(img));
  hsize_t nchunks = 0;
  if (!space.valid() || H5Dget_num_chunks(img, space.get(), &nchunks) < 0) {
    return h5::ErrorFromStack(StatusCode::kCorruption,
                              q.name + ": dataset 'images': cannot count chunks");
  }
  if (static_cast<int64_t>(nchunks) != n) {
    return Status::Corruption(q.name + ": dataset 'images' has " + std::to_string(nchunks) +
                              " chunks for " + std::to_string(n) + " samples");
  }
  for (int64_t i = 0; i < n; ++i) {
    hsize_t coord[4] = {static_cast<hsize_t>(i), 0, 0, 0};
    hsize_t size = 0;
    if (H5Dget_chunk_storage_size(img, coord, &size) < 0 || size != records[i].size) {
      h5::ClearErrors();
      return Status::Corruption(q.name + " sample " + std::to_string(i) + ": the chunk index " +
                                "gives " + std::to_string(records[i].size) +
                                " stored bytes, HDF5 " + std::to_string(size));
    }
  }
  for (int64_t i : {int64_t{0}, n - 1}) {
    if (i < 0) break;
    hsize_t coord[4] = {static_cast<hsize_t>(i), 0, 0, 0};
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(img, coord, &mask, &addr, &size) < 0 ||
        addr != records[i].offset || mask != records[i].filter_mask) {
      h5::ClearErrors();
      return Status::Corruption(q.name + " sample " + std::to_string(i) + ": the chunk index " +
                                "and HDF5 disagree on where its chunk lies");
    }
  }
  return Status::OK();
}

// The chunk table: one chunk per sample, read by the chunk index walk (or one by one for
// another index type), each checked against the file and the image size, then against HDF5.
Status ReadChunkTable(const ShardQuery& q, hid_t file, hid_t img, ShardLayout* out) {
  const int64_t n = q.entry->samples;
  MM_ASSIGN_OR_RETURN(ChunkIndexHints hints, IndexHints(q, file, img));
  const ChunkGrid grid{{1, static_cast<uint32_t>(q.info->image_height),
                        static_cast<uint32_t>(q.info->image_width), 3},
                       /*element_size=*/1,
                       n};
  // The walk comes before any HDF5 pass over the index: HDF5 1.10.8 recurses without end into
  // a B-tree node that is its own child (a crafted shard crashed the process with SIGSEGV in
  // H5Dget_num_chunks), so HDF5 is only asked about an index the walk found to be a tree.
  auto walked = ReadChunkIndex(q.file->data(), q.file->size(), hints, grid);
  if (!walked.ok()) {
    if (walked.status().code() != StatusCode::kUnsupported) {
      return walked.status().WithContext(q.name + ": dataset 'images': chunk index");
    }
    walked = QueryChunksOneByOne(q, img, walked.status());
    if (!walked.ok()) return walked.status();
  }
  const std::vector<ChunkRecord>& records = walked.value();
  out->chunk_offset.resize(n);
  out->chunk_size.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const ChunkRecord& r = records[i];
    const bool raw = !out->compressed || (r.filter_mask & 1u);
    MM_RETURN_NOT_OK(CheckChunk(q, i, r.offset, r.size, raw));
    out->chunk_offset[i] = r.offset;
    out->chunk_size[i] = r.size | (raw ? kRawChunkFlag : 0u);
  }
  return CrossCheck(q, img, records);
}

// Where table `d` (of type `t`, place->bytes bytes) lies: its file offset when contiguous
// (H5Dget_offset), else its bytes read through HDF5 into *memory, at most as many bytes as the
// file holds (mmpack never writes such a table).
Status PlaceTable(const ShardQuery& q, hid_t d, hid_t t, TableType type, const std::string& where,
                  TablePlace* place, std::vector<uint8_t>* memory) {
  h5::PropList dcpl(H5Dget_create_plist(d));
  if (dcpl.valid() && H5Pget_layout(dcpl.get()) == H5D_CONTIGUOUS) {
    haddr_t offset = H5Dget_offset(d);
    if (offset == HADDR_UNDEF) {
      h5::ClearErrors();
      return Status::Corruption(where + " has no storage in the file");
    }
    place->offset = offset;
    return Status::OK();
  }
  if (place->bytes > q.file->size()) {
    return Status::Corruption(where + " would take " + std::to_string(place->bytes) +
                              " bytes of memory, more than the file holds");
  }
  memory->resize(place->bytes);
  h5::Datatype mem(type == TableType::kFixedString
                       ? H5Tcopy(t)
                       : H5Tcopy(type == TableType::kInt64 ? H5T_STD_I64LE : H5T_STD_I32LE));
  if (H5Dread(d, mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, memory->data()) < 0) {
    return h5::ErrorFromStack(StatusCode::kCorruption, where + ": read failed");
  }
  place->in_memory = true;
  return Status::OK();
}

// Checks dataset `name`'s type and 1-D shape [expected_len], and finds where its bytes lie
// (PlaceTable).
Status LocateTable(const ShardQuery& q, hid_t file, const char* name, TableType type,
                   int64_t expected_len, TablePlace* place, size_t* elem_size,
                   std::vector<uint8_t>* memory) {
  std::string where = q.name + ": dataset '" + std::string(name) + "'";
  h5::Dataset d(H5Dopen2(file, name, H5P_DEFAULT));
  if (!d.valid()) return h5::ErrorFromStack(StatusCode::kCorruption, where + " missing");
  h5::Datatype t(H5Dget_type(d.get()));
  if (!t.valid()) return h5::ErrorFromStack(StatusCode::kCorruption, where + ": no type");
  MM_RETURN_NOT_OK(CheckTableType(t.get(), type, where));
  const size_t size = H5Tget_size(t.get());
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
  place->bytes = dims[0] * size;  // expected_len < 2^59, size <= 65536 (CheckTableType)
  if (place->bytes == 0) return Status::OK();
  return PlaceTable(q, d.get(), t.get(), type, where, place, memory);
}

// keys, caption_offsets, token_offsets, tokens: types, lengths, places.
Status LocateTables(const ShardQuery& q, hid_t file, ShardLayout* out) {
  const ShardEntry& e = *q.entry;
  size_t elem = 0;
  MM_RETURN_NOT_OK(LocateTable(q, file, mm::format::kKeys, TableType::kFixedString, e.samples,
                               &out->places[kKeysTable], &out->key_size, &out->owned[kKeysTable]));
  MM_RETURN_NOT_OK(LocateTable(q, file, mm::format::kCaptionOffsets, TableType::kInt64,
                               e.samples + 1, &out->places[kCaptionOffsetsTable], &elem,
                               &out->owned[kCaptionOffsetsTable]));
  MM_RETURN_NOT_OK(LocateTable(q, file, mm::format::kTokenOffsets, TableType::kInt64,
                               e.captions + 1, &out->places[kTokenOffsetsTable], &elem,
                               &out->owned[kTokenOffsetsTable]));
  return LocateTable(q, file, mm::format::kTokens, TableType::kInt32, e.tokens,
                     &out->places[kTokensTable], &elem, &out->owned[kTokensTable]);
}

// Reads the whole of a contiguous numeric table `name` ([dims], `type` little-endian) into
// `out` through HDF5, after checking its type and shape.
template <typename T>
Status ReadWholeTable(const ShardQuery& q, hid_t file, const char* name, TableType type,
                      std::vector<hsize_t> dims, std::vector<T>* out) {
  const std::string where = q.name + ": dataset '" + std::string(name) + "'";
  h5::Dataset d(H5Dopen2(file, name, H5P_DEFAULT));
  if (!d.valid()) return h5::ErrorFromStack(StatusCode::kCorruption, where + " missing");
  h5::Datatype t(H5Dget_type(d.get()));
  if (!t.valid()) return h5::ErrorFromStack(StatusCode::kCorruption, where + ": no type");
  MM_RETURN_NOT_OK(CheckTableType(t.get(), type, where));
  h5::Dataspace s(H5Dget_space(d.get()));
  hsize_t got[2] = {0, 0};
  const int rank = s.valid() ? H5Sget_simple_extent_ndims(s.get()) : -1;
  if (rank != static_cast<int>(dims.size()) || H5Sget_simple_extent_dims(s.get(), got, nullptr) != rank ||
      got[0] != dims[0] || (rank == 2 && got[1] != dims[1])) {
    h5::ClearErrors();
    return Status::Corruption(where + " is not of the shape the index implies");
  }
  size_t n = 1;
  for (hsize_t v : dims) n *= static_cast<size_t>(v);
  out->resize(n);
  if (n == 0) return Status::OK();
  if (H5Dread(d.get(), type == TableType::kInt64 ? H5T_NATIVE_INT64 : H5T_NATIVE_INT32, H5S_ALL,
              H5S_ALL, H5P_DEFAULT, out->data()) < 0) {
    return h5::ErrorFromStack(StatusCode::kCorruption, where + ": read failed");
  }
  return Status::OK();
}

// Codec jpeg (format 2): image_bytes is uint8 [B], contiguous; image_offsets int64 [N + 1] from 0
// strictly increasing to B; image_size int32 [N, 2] within the set's rules. Each sample's JPEG
// becomes a "chunk": (file offset of image_bytes + image_offsets[i], its length).
Status QueryJpegImages(const ShardQuery& q, hid_t file, ShardLayout* out) {
  const int64_t n = q.entry->samples;
  const std::string where = q.name + ": dataset 'image_bytes'";
  std::vector<int64_t> offsets;
  MM_RETURN_NOT_OK(ReadWholeTable(q, file, mm::format::kImageOffsets, TableType::kInt64,
                                  {static_cast<hsize_t>(n + 1)}, &offsets));
  MM_RETURN_NOT_OK(ReadWholeTable(q, file, mm::format::kImageSize, TableType::kInt32,
                                  {static_cast<hsize_t>(n), 2}, &out->image_size));
  MM_RETURN_NOT_OK(CheckImageSizes(q.name, out->image_size.data(), n, *q.info));
  h5::Dataset d(H5Dopen2(file, mm::format::kImageBytes, H5P_DEFAULT));
  if (!d.valid()) return h5::ErrorFromStack(StatusCode::kCorruption, where + " missing");
  h5::Datatype t(H5Dget_type(d.get()));
  if (!t.valid()) return h5::ErrorFromStack(StatusCode::kCorruption, where + ": no type");
  MM_RETURN_NOT_OK(CheckTableType(t.get(), TableType::kUint8, where));
  h5::Dataspace s(H5Dget_space(d.get()));
  hsize_t bytes = 0;
  if (!s.valid() || H5Sget_simple_extent_ndims(s.get()) != 1 ||
      H5Sget_simple_extent_dims(s.get(), &bytes, nullptr) != 1) {
    h5::ClearErrors();
    return Status::Corruption(where + " is not one-dimensional");
  }
  h5::PropList dcpl(H5Dget_create_plist(d.get()));
  const haddr_t base = H5Dget_offset(d.get());
  if (!dcpl.valid() || H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS || base == HADDR_UNDEF) {
    h5::ClearErrors();
    return Status::Corruption(where + " is not stored contiguous in the file");
  }
  if (offsets[0] != 0 || offsets[static_cast<size_t>(n)] != static_cast<int64_t>(bytes)) {
    return Status::Corruption(q.name + ": image_offsets run from " + std::to_string(offsets[0]) +
                              " to " + std::to_string(offsets[static_cast<size_t>(n)]) +
                              ", image_bytes holds " + std::to_string(bytes));
  }
  out->jpeg = true;
  out->compressed = false;
  out->chunk_offset.resize(static_cast<size_t>(n));
  out->chunk_size.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = offsets[static_cast<size_t>(i)], e = offsets[static_cast<size_t>(i) + 1];
    if (e <= b || e - b > static_cast<int64_t>(kChunkSizeMask)) {
      return Status::Corruption(q.name + " sample " + std::to_string(i) + ": image_offsets [" +
                                std::to_string(b) + ", " + std::to_string(e) +
                                ") is empty, decreasing or over 2 GiB");
    }
    MM_RETURN_NOT_OK(CheckChunk(q, i, base + static_cast<uint64_t>(b), static_cast<uint64_t>(e - b),
                                /*raw=*/true));
    out->chunk_offset[static_cast<size_t>(i)] = base + static_cast<uint64_t>(b);
    out->chunk_size[static_cast<size_t>(i)] = static_cast<uint32_t>(e - b) | kRawChunkFlag;
  }
  return Status::OK();
}

Status QueryLayoutLocked(const ShardQuery& q, ShardLayout* out) {
  std::lock_guard<std::mutex> lock(Hdf5Mutex());
  return QueryLayout(q, out);
}

}  // namespace

std::mutex& Hdf5Mutex() {
  static std::mutex m;
  return m;
}

Status CheckChunk(const ShardQuery& q, int64_t i, uint64_t offset, uint64_t size, bool raw) {
  const MappedFile& file = *q.file;
  if (!file.Contains(offset, size) || size == 0) {
    return Status::Corruption(q.name + " sample " + std::to_string(i) + ": image chunk [" +
                              std::to_string(offset) + ", +" + std::to_string(size) +
                              ") lies outside the file (" + std::to_string(file.size()) +
                              " bytes)");
  }
  if (q.jpeg) return Status::OK();  // a JPEG's size depends on its content
  if (raw ? size != q.image_bytes : size > ZSTD_compressBound(q.image_bytes)) {
    return Status::Corruption(q.name + " sample " + std::to_string(i) + ": image chunk of " +
                              std::to_string(size) + " stored bytes cannot hold a " +
                              std::to_string(q.image_bytes) + "-byte image");
  }
  return Status::OK();
}

Status QueryLayout(const ShardQuery& q, ShardLayout* out) {
  h5::SilenceErrors();
  h5::File f(H5Fopen(q.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid()) {
    return h5::ErrorFromStack(StatusCode::kCorruption, q.name + ": not a readable HDF5 file");
  }
  // The shard's own attributes are not read: index.json's version is checked, and parsing
  // attribute messages of a damaged file is where HDF5 1.10.8 itself crashed (found by
  // tests/reader/fuzz_shard.cc); the fewer HDF5 calls on untrusted bytes the better.
  if (q.jpeg) {
    MM_RETURN_NOT_OK(QueryJpegImages(q, f.get(), out));
    return LocateTables(q, f.get(), out);
  }
  h5::Dataset img(H5Dopen2(f.get(), mm::format::kImages, H5P_DEFAULT));
  if (!img.valid()) {
    return h5::ErrorFromStack(StatusCode::kCorruption, q.name + ": dataset 'images' missing");
  }
  MM_RETURN_NOT_OK(CheckImages(q, img.get(), &out->compressed));
  MM_RETURN_NOT_OK(ReadChunkTable(q, f.get(), img.get(), out));
  return LocateTables(q, f.get(), out);
}

Result<ShardLayout> QueryShardLayout(const ShardQuery& q, const OpenOptions& options) {
  ShardLayout layout;
  MM_RETURN_NOT_OK(options.isolate_hdf5 ? QueryLayoutIsolated(q, &layout)
                                        : QueryLayoutLocked(q, &layout));
  return layout;
}

}  // namespace mm::reader::internal
