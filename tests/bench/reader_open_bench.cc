// mm_reader_open_bench: how long ShardSet::Open takes on one large shard, against the reader's
// former way in the same run.
//
//   mm_reader_open_bench WORK_DIR [N...]     (default N: 10000 50000 100000)
//
// For each N, writes WORK_DIR/open-N/ once with the real mm::pack::ShardWriter: N samples of
// 8x8 pixels (zstd level -1, as mmpack build), 2 captions each of 8 token ids, index.json by
// EncodeIndex (mm/internal/index_json.h). Then, with the file in the page cache, measures:
//   open_s      ShardSet::Open (the chunk index walk, its cross-check against HDF5, the table
//               and token checks): the median of 3;
//   walk_s      the chunk index walk alone (ReadChunkIndex on the mapped bytes): median of 3;
//   rules_s     the per-shard set rules alone (CheckTokenTables: offsets, caption lengths, every
//               token id against the vocabulary) on the tables read into memory: median of 3;
//   baseline_s  the former way: H5Fopen, then H5Dget_chunk_info_by_coord for every chunk, as
//               Shard::Open did before (HDF5 1.10.8 passes over the whole index per call); once;
//               skipped (null) when N exceeds MM_OPEN_BENCH_BASELINE_MAX (default 100000).
// Prints one JSON object per N with the ratio baseline_s / open_s; exits 1 if open_s >= 1 s at
// N = 100000 (the target), 0 otherwise. Run it on an idle machine and report `uptime`.
#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mm/internal/index_json.h"
#include "mm/internal/set_rules.h"
#include "mm/reader.h"
#include "shard/chunk_index.h"
#include "shard/mapped_file.h"
#include "shard/shard_writer.h"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename F>
double Median3(F f) {
  double t[3];
  for (double& x : t) {
    const double start = Now();
    f();
    x = Now() - start;
  }
  std::sort(t, t + 3);
  return t[1];
}

// Writes the N-sample set into `dir` unless index.json is already there.
mm::Status WriteSet(const std::string& dir, int64_t n) {
  if (std::filesystem::exists(dir + "/index.json")) return mm::Status::OK();
  std::filesystem::create_directories(dir);
  mm::pack::WriterOptions o;
  o.output_dir = dir;
  o.image_width = o.image_height = 8;
  o.samples_per_shard = n;
  MM_ASSIGN_OR_RETURN(auto writer, mm::pack::ShardWriter::Create(o));
  std::vector<uint8_t> pixels(8 * 8 * 3);
  for (int64_t i = 0; i < n; ++i) {
    for (size_t p = 0; p < pixels.size(); ++p) pixels[p] = static_cast<uint8_t>(i * 31 + p * 7);
    mm::pack::EncodedSample s;
    s.key = "k" + std::to_string(i);
    s.source = s.key + ".jpg";
    MM_ASSIGN_OR_RETURN(s.image_chunk, mm::pack::CompressImage(pixels.data(), pixels.size(),
                                                               o.compression, o.compression_level));
    s.original_width = s.original_height = 8;
    s.valid_box[2] = s.valid_box[3] = 8;
    for (int c = 0; c < 2; ++c) {
      s.captions.push_back("caption " + std::to_string(c) + " of sample " + std::to_string(i));
      std::vector<int32_t> ids;
      for (int k = 0; k < 8; ++k) ids.push_back(static_cast<int32_t>((i * 8 + k + c) % 30000));
      s.tokens.push_back(std::move(ids));
    }
    MM_RETURN_NOT_OK(writer->Add(std::move(s)));
  }
  MM_ASSIGN_OR_RETURN(auto shards, writer->Finish());
  mm::reader::internal::IndexDocument index;
  mm::reader::SetInfo& info = index.info;
  info.image_height = o.image_height;
  info.image_width = o.image_width;
  info.resize_mode = o.resize_mode;
  info.compression = o.compression;
  info.compression_level = o.compression_level;
  info.vocab_size = 30000;
  info.pad_id = 0;
  info.unk_id = 1;
  info.max_tokens = 77;
  info.shards = shards;
  std::ofstream(dir + "/index.json") << mm::reader::internal::EncodeIndex(index);
  return mm::Status::OK();
}

// The former Shard::Open chunk query: every chunk's record through HDF5, one call each.
double Baseline(const std::string& shard, int64_t n) {
  const double start = Now();
  hid_t f = H5Fopen(shard.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "images", H5P_DEFAULT);
  uint64_t sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    hsize_t coord[4] = {static_cast<hsize_t>(i), 0, 0, 0};
    unsigned mask = 0;
    haddr_t addr = 0;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(d, coord, &mask, &addr, &size) < 0) std::abort();
    sum += addr + size;
  }
  H5Dclose(d);
  H5Fclose(f);
  if (sum == 0) std::abort();
  return Now() - start;
}

// ReadChunkIndex alone, with the hints HDF5 gives (asked once, outside the timing).
double WalkOnly(const std::string& shard, int64_t n) {
  mm::reader::internal::ChunkIndexHints h;
  hid_t f = H5Fopen(shard.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "images", H5P_DEFAULT);
  hid_t fcpl = H5Fget_create_plist(f);
  size_t sa = 8, ss = 8;
  H5Pget_sizes(fcpl, &sa, &ss);
  H5Pget_istore_k(fcpl, &h.btree_k);
  H5O_info_t info;
  H5Oget_info2(d, &info, H5O_INFO_BASIC);
  h.header_address = info.addr;
  H5Pclose(fcpl);
  H5Dclose(d);
  H5Fclose(f);
  auto file = mm::reader::internal::MappedFile::Open(shard);
  if (!file.ok()) std::abort();
  const mm::reader::internal::ChunkGrid grid{{1, 8, 8, 3}, 1, n};
  return Median3([&] {
    auto r =
        mm::reader::internal::ReadChunkIndex(file.value()->data(), file.value()->size(), h, grid);
    if (!r.ok()) std::abort();
  });
}

template <typename T>
std::vector<T> ReadTable(hid_t file, const char* name, hid_t type) {
  hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
  hid_t space = H5Dget_space(d);
  std::vector<T> v(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
  if (!v.empty() && H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) < 0) std::abort();
  H5Sclose(space);
  H5Dclose(d);
  return v;
}

// CheckTokenTables alone, on the shard's tables read into memory (as mmpack verify holds them).
double RulesOnly(const std::string& dir, const std::string& shard, int64_t* tokens) {
  hid_t f = H5Fopen(shard.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  auto co = ReadTable<int64_t>(f, "caption_offsets", H5T_NATIVE_INT64);
  auto to = ReadTable<int64_t>(f, "token_offsets", H5T_NATIVE_INT64);
  auto ids = ReadTable<int32_t>(f, "tokens", H5T_NATIVE_INT32);
  H5Fclose(f);
  auto set = mm::reader::ShardSet::Open(dir);
  if (!set.ok()) std::abort();
  mm::reader::TokenTables t;
  t.samples = static_cast<int64_t>(co.size()) - 1;
  t.captions = static_cast<int64_t>(to.size()) - 1;
  t.tokens = static_cast<int64_t>(ids.size());
  t.caption_offsets = co.data();
  t.token_offsets = to.data();
  t.token_ids = ids.data();
  *tokens = t.tokens;
  return Median3([&] {
    if (!mm::reader::CheckTokenTables("bench", t, set.value()->info()).ok()) std::abort();
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s WORK_DIR [N...]\n", argv[0]);
    return 2;
  }
  std::vector<int64_t> sizes;
  for (int a = 2; a < argc; ++a) sizes.push_back(std::atoll(argv[a]));
  if (sizes.empty()) sizes = {10000, 50000, 100000};
  const char* max_env = std::getenv("MM_OPEN_BENCH_BASELINE_MAX");
  const int64_t baseline_max = max_env ? std::atoll(max_env) : 100000;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  int rc = 0;
  for (int64_t n : sizes) {
    const std::string dir = std::string(argv[1]) + "/open-" + std::to_string(n);
    mm::Status st = WriteSet(dir, n);
    if (!st.ok()) {
      std::fprintf(stderr, "mm_reader_open_bench: %s\n", st.ToString().c_str());
      return 1;
    }
    const std::string shard = dir + "/shard-000000.h5";
    (void)Baseline(shard, std::min<int64_t>(n, 10));  // page cache, HDF5 initialised
    const double open_s = Median3([&] {
      auto set = mm::reader::ShardSet::Open(dir);
      if (!set.ok()) {
        std::fprintf(stderr, "%s\n", set.status().ToString().c_str());
        std::abort();
      }
    });
    const double walk_s = WalkOnly(shard, n);
    int64_t tokens = 0;
    const double rules_s = RulesOnly(dir, shard, &tokens);
    const double baseline_s = n <= baseline_max ? Baseline(shard, n) : -1;
    std::printf(
        "{\"samples\": %lld, \"tokens\": %lld, \"shard_bytes\": %llu, \"open_s\": %.4f, "
        "\"walk_s\": %.4f, \"rules_s\": %.4f, ",
        static_cast<long long>(n), static_cast<long long>(tokens),
        static_cast<unsigned long long>(std::filesystem::file_size(shard)), open_s, walk_s,
        rules_s);
    if (baseline_s >= 0) {
      std::printf("\"baseline_s\": %.3f, \"baseline_over_open\": %.1f}\n", baseline_s,
                  baseline_s / open_s);
    } else {
      std::printf("\"baseline_s\": null}\n");
    }
    std::fflush(stdout);
    if (n == 100000 && open_s >= 1.0) rc = 1;
  }
  return rc;
}
