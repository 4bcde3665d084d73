// shard_fixture.h: real shard sets for the reader's tests and benchmarks.
//
// Decodes real photos from ${MM_SHARED_DIR}/data (libvips: centre crop to W x H, sRGB, 3
// bands), and writes them as format-v1 shards (schemas/FORMAT.md) with the HDF5 C API directly
// (direct chunk writes of zstd frames, as `mmpack build` does), plus index.json. Writing here
// rather than through mm::pack::ShardWriter lets the tests also craft layouts the writer never
// produces (unaligned token tables, chunked tables). Token ids are a stable word hash: the
// reader never interprets them.
#pragma once

#include <hdf5.h>
#include <vips/vips.h>
#include <xxhash.h>
#include <zstd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "mm/format.h"
#include "mm/status.h"

namespace mm::testing {

inline std::string SharedDir() {
  const char* env = std::getenv("MM_SHARED_DIR");
#ifdef MM_SHARED_DIR
  return env ? env : MM_SHARED_DIR;
#else
  return env ? env : "";
#endif
}

/// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "mm_reader") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (tag + "_XXXXXX")).string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path_ = mkdtemp(buf.data()) ? buf.data() : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct RawSample {
  std::string key;
  std::string source;
  std::vector<uint8_t> pixels;  // [height, width, 3] uint8
  std::vector<std::string> captions;
  std::vector<std::vector<int32_t>> tokens;  // one row per caption
};

/// Stable fake tokenization: one id per whitespace-separated word, in [5, 30000), at most 77.
inline std::vector<int32_t> FakeTokens(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word && ids.size() < 77) {
    uint64_t h = XXH3_64bits(word.data(), word.size());
    ids.push_back(static_cast<int32_t>(5 + h % 29995));
  }
  return ids;
}

/// Decodes `path` with libvips, centre-cropped to width x height, as [height, width, 3] uint8.
inline Status DecodeImage(const std::string& path, int width, int height,
                          std::vector<uint8_t>* out) {
  static bool started = [] { return VIPS_INIT("mm_reader_test") == 0; }();
  if (!started) return Status::Internal("VIPS_INIT failed");
  VipsImage* img = nullptr;
  if (vips_thumbnail(path.c_str(), &img, width, "height", height, "crop", VIPS_INTERESTING_CENTRE,
                     "size", VIPS_SIZE_FORCE, nullptr) != 0) {
    std::string msg = vips_error_buffer();
    vips_error_clear();
    return Status::Corruption(path + ": " + msg);
  }
  auto unref = [](VipsImage* i) {
    if (i) g_object_unref(i);
  };
  VipsImage* t = nullptr;
  if (vips_colourspace(img, &t, VIPS_INTERPRETATION_sRGB, nullptr) != 0) {
    unref(img);
    return Status::Internal("colourspace");
  }
  unref(img);
  img = t;
  if (vips_image_hasalpha(img)) {
    if (vips_flatten(img, &t, nullptr) != 0) {
      unref(img);
      return Status::Internal("flatten");
    }
    unref(img);
    img = t;
  }
  if (vips_cast_uchar(img, &t, nullptr) != 0) {
    unref(img);
    return Status::Internal("cast");
  }
  unref(img);
  img = t;
  if (img->Bands != 3 || img->Xsize != width || img->Ysize != height) {
    unref(img);
    return Status::Internal(path + ": unexpected decoded shape");
  }
  size_t size = 0;
  void* mem = vips_image_write_to_memory(img, &size);
  unref(img);
  if (!mem || size != static_cast<size_t>(width) * height * 3) {
    g_free(mem);
    return Status::Internal("write_to_memory");
  }
  out->assign(static_cast<uint8_t*>(mem), static_cast<uint8_t*>(mem) + size);
  g_free(mem);
  return Status::OK();
}

/// The first `limit` images (0: all) of `set_dir`/captions.jsonl, in file order, with all
/// their captions, decoded to width x height.
inline Result<std::vector<RawSample>> LoadRealSamples(const std::string& set_dir, int limit,
                                                      int width, int height) {
  std::ifstream in(set_dir + "/captions.jsonl");
  if (!in) return Status::NotFound(set_dir + "/captions.jsonl");
  std::vector<RawSample> samples;
  std::map<std::string, size_t> by_image;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    std::string image = j.at("image").get<std::string>();
    std::string text = j.at("text").get<std::string>();
    auto it = by_image.find(image);
    if (it == by_image.end()) {
      if (limit > 0 && static_cast<int>(samples.size()) >= limit) continue;
      it = by_image.emplace(image, samples.size()).first;
      RawSample s;
      s.source = image;
      s.key = std::filesystem::path(image).stem().string();
      samples.push_back(std::move(s));
    }
    samples[it->second].captions.push_back(text);
    samples[it->second].tokens.push_back(FakeTokens(text));
  }
  for (RawSample& s : samples) {
    MM_RETURN_NOT_OK(DecodeImage(set_dir + "/" + s.source, width, height, &s.pixels));
  }
  return samples;
}

struct FixtureOptions {
  int width = 64;
  int height = 48;
  std::string compression = "zstd";  // zstd | none
  int level = 3;
  int64_t samples_per_shard = 0;  // 0: one shard
  bool chunked_tables = false;    // store the offset tables chunked (not what mmpack writes)
  int pad_id = 0;
  int vocab_size = 30000;
  int max_tokens = 77;
  // HDF5 file format bounds (H5Pset_libver_bounds). mmpack writes earliest..v110: superblock
  // v0, version 1 object headers, layout message v3, a version 1 B-tree chunk index. v18..v18
  // gives version 2 object headers ("OHDR") over the same index; v110 as the low bound gives a
  // layout message v4 with a newer chunk index (a fixed array here).
  H5F_libver_t libver_low = H5F_LIBVER_EARLIEST;
  H5F_libver_t libver_high = H5F_LIBVER_V110;
  hsize_t userblock = 0;  // bytes before the superblock (H5Pset_userblock); mmpack writes none
};

namespace detail {

inline Status H5Fail(const std::string& what) { return Status::Internal("fixture HDF5: " + what); }

template <typename T>
inline Status WriteTable(hid_t file, const char* name, hid_t type, const std::vector<T>& values,
                         bool chunked) {
  hsize_t dims[1] = {values.size()};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (chunked && !values.empty()) {
    hsize_t chunk[1] = {std::min<hsize_t>(values.size(), 7)};
    H5Pset_chunk(dcpl, 1, chunk);
  }
  hid_t d = H5Dcreate2(file, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  herr_t rc =
      d < 0
          ? -1
          : (values.empty() ? 0 : H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  if (d >= 0) H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  return rc < 0 ? H5Fail(name) : Status::OK();
}

inline void AttrInt(hid_t file, const char* name, hid_t type, int64_t v) {
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
  H5Sclose(space);
}

inline void AttrStr(hid_t file, const char* name, const std::string& v) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, std::max<size_t>(1, v.size()));
  H5Tset_cset(type, H5T_CSET_UTF8);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, type, v.c_str());
  H5Aclose(a);
  H5Sclose(space);
  H5Tclose(type);
}

inline std::string Hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

}  // namespace detail

/// Writes `samples` [begin, end) as shard `index` in `dir`; returns its index.json entry.
inline Result<nlohmann::json> WriteShard(const std::string& dir, int index,
                                         const std::vector<RawSample>& samples, size_t begin,
                                         size_t end, const FixtureOptions& opt) {
  using detail::H5Fail;
  char name[32];
  std::snprintf(name, sizeof(name), "shard-%06d.h5", index);
  std::string path = dir + "/" + name;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, opt.libver_low, opt.libver_high);
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  if (opt.userblock > 0) H5Pset_userblock(fcpl, opt.userblock);
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, fapl);
  H5Pclose(fapl);
  H5Pclose(fcpl);
  if (file < 0) return H5Fail("create " + path);
  const int64_t n = static_cast<int64_t>(end - begin);
  const size_t image_bytes = static_cast<size_t>(opt.width) * opt.height * 3;

  // images: chunked [1, H, W, 3], zstd filter (optional, so no plugin is needed to create).
  hsize_t dims[4] = {static_cast<hsize_t>(n), static_cast<hsize_t>(opt.height),
                     static_cast<hsize_t>(opt.width), 3};
  hsize_t chunk[4] = {1, dims[1], dims[2], 3};
  hid_t space = H5Screate_simple(4, dims, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 4, chunk);
  H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
  H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_INCR);
  if (opt.compression == "zstd") {
    unsigned cd[1] = {static_cast<unsigned>(opt.level)};
    H5Pset_filter(dcpl, mm::format::kZstdFilterId, H5Z_FLAG_OPTIONAL, 1, cd);
  }
  hid_t images =
      H5Dcreate2(file, mm::format::kImages, H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Pclose(dcpl);
  H5Sclose(space);
  if (images < 0) return H5Fail("images");
  std::vector<char> frame(ZSTD_compressBound(image_bytes));
  for (int64_t i = 0; i < n; ++i) {
    const RawSample& s = samples[begin + i];
    hsize_t off[4] = {static_cast<hsize_t>(i), 0, 0, 0};
    const void* data = s.pixels.data();
    size_t size = image_bytes;
    if (opt.compression == "zstd") {
      size = ZSTD_compress(frame.data(), frame.size(), s.pixels.data(), image_bytes, opt.level);
      if (ZSTD_isError(size)) return Status::Internal("zstd");
      data = frame.data();
    }
    if (H5Dwrite_chunk(images, H5P_DEFAULT, 0, off, size, data) < 0) return H5Fail("chunk");
  }
  H5Dclose(images);

  // keys: fixed-length UTF-8, NUL-padded to the longest.
  size_t key_len = 1;
  for (size_t i = begin; i < end; ++i) key_len = std::max(key_len, samples[i].key.size());
  std::vector<char> keys(static_cast<size_t>(n) * key_len, '\0');
  for (int64_t i = 0; i < n; ++i) {
    const std::string& k = samples[begin + i].key;
    std::copy(k.begin(), k.end(), keys.begin() + i * key_len);
  }
  hid_t ktype = H5Tcopy(H5T_C_S1);
  H5Tset_size(ktype, key_len);
  H5Tset_strpad(ktype, H5T_STR_NULLPAD);
  H5Tset_cset(ktype, H5T_CSET_UTF8);
  {
    hsize_t kd[1] = {static_cast<hsize_t>(n)};
    hid_t ks = H5Screate_simple(1, kd, nullptr);
    hid_t kds =
        H5Dcreate2(file, mm::format::kKeys, ktype, ks, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (kds < 0 || (n > 0 && H5Dwrite(kds, ktype, H5S_ALL, H5S_ALL, H5P_DEFAULT, keys.data()) < 0))
      return H5Fail("keys");
    H5Dclose(kds);
    H5Sclose(ks);
  }
  H5Tclose(ktype);

  // sources, captions: variable-length strings.
  hid_t vtype = H5Tcopy(H5T_C_S1);
  H5Tset_size(vtype, H5T_VARIABLE);
  H5Tset_cset(vtype, H5T_CSET_UTF8);
  std::vector<const char*> sources, captions;
  std::vector<int64_t> caption_offsets{0}, token_offsets{0};
  std::vector<int32_t> tokens, original, valid;
  for (size_t i = begin; i < end; ++i) {
    const RawSample& s = samples[i];
    sources.push_back(s.source.c_str());
    for (size_t c = 0; c < s.captions.size(); ++c) {
      captions.push_back(s.captions[c].c_str());
      tokens.insert(tokens.end(), s.tokens[c].begin(), s.tokens[c].end());
      token_offsets.push_back(static_cast<int64_t>(tokens.size()));
    }
    caption_offsets.push_back(static_cast<int64_t>(captions.size()));
    original.insert(original.end(), {opt.width, opt.height});
    valid.insert(valid.end(), {0, 0, opt.width, opt.height});
  }
  MM_RETURN_NOT_OK(detail::WriteTable(file, mm::format::kSources, vtype, sources, false));
  MM_RETURN_NOT_OK(detail::WriteTable(file, mm::format::kCaptions, vtype, captions, false));
  H5Tclose(vtype);
  // original_size and valid_box are 2-D in the spec; the reader does not read them, so 1-D
  // flattened copies keep the fixture short.
  MM_RETURN_NOT_OK(detail::WriteTable(file, mm::format::kCaptionOffsets, H5T_STD_I64LE,
                                      caption_offsets, opt.chunked_tables));
  MM_RETURN_NOT_OK(detail::WriteTable(file, mm::format::kTokenOffsets, H5T_STD_I64LE, token_offsets,
                                      opt.chunked_tables));
  MM_RETURN_NOT_OK(
      detail::WriteTable(file, mm::format::kTokens, H5T_STD_I32LE, tokens, opt.chunked_tables));
  detail::AttrStr(file, mm::format::kAttrFormat, std::string(mm::format::kFormatName));
  detail::AttrInt(file, mm::format::kAttrFormatVersion, H5T_STD_I32LE, mm::format::kFormatVersion);
  detail::AttrInt(file, mm::format::kAttrShardIndex, H5T_STD_I64LE, index);
  detail::AttrInt(file, mm::format::kAttrNumSamples, H5T_STD_I64LE, n);
  detail::AttrInt(file, mm::format::kAttrNumCaptions, H5T_STD_I64LE,
                  static_cast<int64_t>(captions.size()));
  detail::AttrInt(file, mm::format::kAttrImageHeight, H5T_STD_I32LE, opt.height);
  detail::AttrInt(file, mm::format::kAttrImageWidth, H5T_STD_I32LE, opt.width);
  detail::AttrStr(file, mm::format::kAttrCompression, opt.compression);
  if (H5Fclose(file) < 0) return H5Fail("close");

  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json entry = {{"file", name},
                          {"samples", n},
                          {"captions", captions.size()},
                          {"tokens", tokens.size()},
                          {"bytes", bytes.size()},
                          {"xxh3_64", detail::Hex16(XXH3_64bits(bytes.data(), bytes.size()))}};
  return entry;
}

/// Writes `samples` as a shard set in `dir` (shards + index.json).
inline Status WriteShardSet(const std::string& dir, const std::vector<RawSample>& samples,
                            const FixtureOptions& opt) {
  std::filesystem::create_directories(dir);
  nlohmann::json shards = nlohmann::json::array();
  int64_t per =
      opt.samples_per_shard > 0 ? opt.samples_per_shard : std::max<int64_t>(1, samples.size());
  int64_t total_samples = 0, total_captions = 0, total_tokens = 0, total_bytes = 0;
  int index = 0;
  for (size_t b = 0; b < samples.size(); b += per, ++index) {
    size_t e = std::min(samples.size(), b + static_cast<size_t>(per));
    MM_ASSIGN_OR_RETURN(nlohmann::json entry, WriteShard(dir, index, samples, b, e, opt));
    total_samples += entry["samples"].get<int64_t>();
    total_captions += entry["captions"].get<int64_t>();
    total_tokens += entry["tokens"].get<int64_t>();
    total_bytes += entry["bytes"].get<int64_t>();
    shards.push_back(entry);
  }
  nlohmann::json index_json = {
      {"format", std::string(mm::format::kFormatName)},
      {"format_version", mm::format::kFormatVersion},
      {"created_by", "mm_reader_test fixture"},
      {"image",
       {{"height", opt.height},
        {"width", opt.width},
        {"channels", 3},
        {"resize_mode", "center-crop"},
        {"background", "#ffffff"}}},
      {"compression",
       {{"codec", opt.compression},
        {"level", opt.level},
        {"hdf5_filter_id", mm::format::kZstdFilterId}}},
      {"tokenizer",
       {{"file", "tokenizer.model"},
        {"sha256", "0"},
        {"vocab_size", opt.vocab_size},
        {"pad_id", opt.pad_id},
        {"unk_id", 1},
        {"bos_id", -1},
        {"eos_id", -1},
        {"max_tokens", opt.max_tokens},
        {"trained", false}}},
      {"build_options", nlohmann::json::object()},
      {"shards", shards},
      {"totals",
       {{"shards", shards.size()},
        {"samples", total_samples},
        {"captions", total_captions},
        {"tokens", total_tokens},
        {"bytes", total_bytes}}},
      {"dropped", {{"total", 0}, {"by_reason", nlohmann::json::object()}}}};
  std::ofstream out(dir + "/" + std::string(mm::format::kIndexFile));
  out << index_json.dump(2) << "\n";
  return out.good() ? Status::OK() : Status::IOError("index.json");
}

/// Lets H5Dread decode zstd chunks (filter 32015) in this process, for comparing the reader
/// with HDF5's own read path without the plugin.
inline herr_t RegisterZstdFilterForTests() {
  static H5Z_class2_t cls = {
      H5Z_CLASS_T_VERS,
      static_cast<H5Z_filter_t>(mm::format::kZstdFilterId),
      1,
      1,
      "zstd (mm_reader_test)",
      nullptr,
      nullptr,
      [](unsigned flags, size_t, const unsigned[], size_t nbytes, size_t* buf_size,
         void** buf) -> size_t {
        if (!(flags & H5Z_FLAG_REVERSE)) return 0;  // decode only
        unsigned long long size = ZSTD_getFrameContentSize(*buf, nbytes);
        if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) return 0;
        void* out = H5allocate_memory(size, false);
        size_t got = ZSTD_decompress(out, size, *buf, nbytes);
        if (ZSTD_isError(got)) {
          H5free_memory(out);
          return 0;
        }
        H5free_memory(*buf);
        *buf = out;
        *buf_size = size;
        return got;
      }};
  return H5Zregister(&cls);
}

}  // namespace mm::testing

namespace mm::testing {

/// coco-cc's photos decoded once per test binary (51 images, 5 captions each).
inline const std::vector<RawSample>& CocoSamples(int width = 64, int height = 48) {
  static std::map<std::pair<int, int>, std::vector<RawSample>> cache;
  auto it = cache.find({width, height});
  if (it == cache.end()) {
    auto r = LoadRealSamples(SharedDir() + "/data/coco-cc", 0, width, height);
    if (!r.ok()) {
      std::fprintf(stderr, "cannot load coco-cc: %s\n", r.status().ToString().c_str());
      std::abort();
    }
    it = cache.emplace(std::make_pair(width, height), std::move(r).value()).first;
  }
  return it->second;
}

/// A shard set of coco-cc written once per (options) per test binary; kept until exit.
inline std::string CocoSet(const FixtureOptions& opt) {
  static std::map<std::string, std::unique_ptr<TempDir>> cache;
  std::string tag = opt.compression + "_" + std::to_string(opt.samples_per_shard) + "_" +
                    std::to_string(opt.width) + "x" + std::to_string(opt.height) +
                    (opt.chunked_tables ? "_chunked" : "") + "_libver" +
                    std::to_string(opt.libver_low) + std::to_string(opt.libver_high) + "_ub" +
                    std::to_string(opt.userblock) + "_v" + std::to_string(opt.vocab_size) + "_m" +
                    std::to_string(opt.max_tokens) + "_p" + std::to_string(opt.pad_id);
  auto it = cache.find(tag);
  if (it == cache.end()) {
    auto dir = std::make_unique<TempDir>("mm_coco");
    Status st = WriteShardSet(dir->path(), CocoSamples(opt.width, opt.height), opt);
    if (!st.ok()) {
      std::fprintf(stderr, "cannot write fixture: %s\n", st.ToString().c_str());
      std::abort();
    }
    it = cache.emplace(tag, std::move(dir)).first;
  }
  return it->second->path();
}

/// `n` samples cycling through coco-cc's photos decoded at width x height (tiny sizes keep big
/// shards quick to write), each with its own key ("s<i>") and the photo's captions.
inline std::vector<RawSample> ManySamples(int64_t n, int width = 4, int height = 4) {
  const std::vector<RawSample>& coco = CocoSamples(width, height);
  std::vector<RawSample> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    out[i] = coco[static_cast<size_t>(i) % coco.size()];
    out[i].key = "s" + std::to_string(i);
  }
  return out;
}

/// Copies a set directory (to damage the copy).
inline void CopySet(const std::string& from, const std::string& to) {
  std::filesystem::copy(
      from, to,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Rewrites index.json's shard entry `k` "bytes" and "xxh3_64" to match the file as it is now
/// (so a damaged shard gets past the size check and reaches the HDF5 and table checks).
inline void RefreshIndexEntry(const std::string& dir, int k) {
  std::string index_path = dir + "/" + std::string(mm::format::kIndexFile);
  auto j = nlohmann::json::parse(ReadFile(index_path));
  auto& e = j["shards"][k];
  std::string bytes = ReadFile(dir + "/" + e["file"].get<std::string>());
  int64_t old = e["bytes"].get<int64_t>();
  e["bytes"] = bytes.size();
  e["xxh3_64"] = detail::Hex16(XXH3_64bits(bytes.data(), bytes.size()));
  j["totals"]["bytes"] =
      j["totals"]["bytes"].get<int64_t>() - old + static_cast<int64_t>(bytes.size());
  WriteFile(index_path, j.dump(2));
}

}  // namespace mm::testing
