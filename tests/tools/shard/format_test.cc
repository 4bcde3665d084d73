// format_test.cc: the shard format's write side (ShardWriter, CompressImage), `mmpack verify`,
// `mmpack info`, `mmpack env`, and the zstd filter plugin as h5dump loads it.
//
// Pixels are real: COCO photos from MM_SHARED_DIR/data/coco-cc, decoded and resized by the
// `vips` command (libvips, as mmpack uses it) into raw RGB bytes.
#include "mm/format.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "commands/commands.h"
#include "mm/internal/index_json.h"
#include "shard/shard_writer.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kWidth = 40;  // pixels; small so that tests stay fast
constexpr int kHeight = 32;

std::string Shared(const std::string& rel) { return std::string(MM_SHARED_DIR) + "/" + rel; }

std::string RunCommand(const std::string& command, int* exit_code) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    *exit_code = -1;
    return output;
  }
  char buffer[4096];
  size_t got;
  while ((got = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, got);
  int status = pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

std::vector<uint8_t> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// A fresh directory under the test temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/mm_format_test_XXXXXX";
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path Sub(const std::string& name) const {
    fs::create_directories(path_ / name);
    return path_ / name;
  }

 private:
  fs::path path_;
};

// Real COCO photos, centre-cropped to kWidth x kHeight by libvips: [kHeight, kWidth, 3] uint8.
const std::vector<std::vector<uint8_t>>& RealImages() {
  static std::vector<std::vector<uint8_t>> images = [] {
    std::vector<std::vector<uint8_t>> out;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(Shared("data/coco-cc/images"))) {
      if (entry.path().extension() == ".jpg") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    files.resize(std::min<size_t>(files.size(), 4));
    TempDir tmp;
    for (const auto& file : files) {
      fs::path raw = tmp.path() / (file.stem().string() + ".raw");
      int rc = 0;
      std::string log = RunCommand("vips thumbnail '" + file.string() + "' '" + raw.string() +
                                       "' " + std::to_string(kWidth) + " --height " +
                                       std::to_string(kHeight) + " --crop centre",
                                   &rc);
      if (rc != 0) {
        ADD_FAILURE() << "vips thumbnail failed: " << log;
        continue;
      }
      out.push_back(ReadFile(raw));
    }
    return out;
  }();
  return images;
}

struct PlainSample {
  std::string key, source;
  std::vector<uint8_t> pixels;
  int32_t original[2];
  int32_t box[4];
  std::vector<std::string> captions;
  std::vector<std::vector<int32_t>> tokens;
};

// Sample i: a real photo, 1..3 captions (one non-ASCII), token rows of varying length (one
// empty row when i % 4 == 3).
PlainSample MakePlain(int i, bool with_tokens = true) {
  const auto& images = RealImages();
  PlainSample s;
  s.key = "coco-" + std::to_string(1000 + i);
  s.source = "images/photo_" + std::to_string(i) + ".jpg";
  s.pixels = images[static_cast<size_t>(i) % images.size()];
  s.original[0] = 640 - i;
  s.original[1] = 480 + i;
  s.box[0] = 0;
  s.box[1] = i % 3;
  s.box[2] = kWidth;
  s.box[3] = kHeight - (i % 3);
  int captions = 1 + i % 3;
  for (int c = 0; c < captions; ++c) {
    s.captions.push_back(c == 1 ? "Ein Café in Zürich – 東京の写真 " + std::to_string(i)
                                : "A photo number " + std::to_string(i) + " caption " +
                                      std::to_string(c));
    std::vector<int32_t> row;
    if (with_tokens && !(i % 4 == 3 && c == 0)) {
      for (int t = 0; t < 3 + (i + c) % 5; ++t) row.push_back(5 + 7 * i + t);
    }
    s.tokens.push_back(row);
  }
  return s;
}

EncodedSample Encode(const PlainSample& p, format::Codec compression = format::Codec::kZstd) {
  EncodedSample e;
  e.key = p.key;
  e.source = p.source;
  auto chunk = CompressImage(p.pixels.data(), p.pixels.size(), compression, 3);
  EXPECT_TRUE(chunk.ok()) << chunk.status().ToString();
  e.image_chunk = chunk.MoveValue();
  e.original_width = p.original[0];
  e.original_height = p.original[1];
  std::copy(p.box, p.box + 4, e.valid_box);
  e.captions = p.captions;
  e.tokens = p.tokens;
  return e;
}

std::string TokenizerModel() { return Shared("tokenizers/albert-30k-clean.model"); }

// sha256 of the real tokenizer, by the sha256sum command (an independent implementation).
const std::string& TokenizerSha256() {
  static const std::string sha = [] {
    int rc = 0;
    std::string out = RunCommand("sha256sum '" + TokenizerModel() + "'", &rc);
    EXPECT_EQ(rc, 0) << out;
    return out.substr(0, 64);
  }();
  return sha;
}

WriterOptions Options(const fs::path& dir) {
  WriterOptions o;
  o.output_dir = dir.string();
  o.image_width = kWidth;
  o.image_height = kHeight;
  o.tokenizer_sha256 = TokenizerSha256();
  o.compression_level = 3;  // not the default, so the tests see the requested level stored
  return o;
}

std::vector<mm::reader::ShardEntry> WriteSet(const WriterOptions& options,
                                             const std::vector<PlainSample>& samples) {
  auto writer = ShardWriter::Create(options);
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  if (!writer.ok()) return {};
  for (const auto& s : samples) {
    Status st = (*writer)->Add(Encode(s, options.compression));
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  auto entries = (*writer)->Finish();
  EXPECT_TRUE(entries.ok()) << entries.status().ToString();
  return entries.ok() ? entries.MoveValue() : std::vector<mm::reader::ShardEntry>{};
}

// index.json as `mmpack build` writes it (FORMAT.md), for verify and info.
void WriteIndex(const WriterOptions& o, const std::vector<mm::reader::ShardEntry>& entries) {
  mm::reader::internal::IndexDocument doc;
  mm::reader::SetInfo& info = doc.info;
  info.image_height = o.image_height;
  info.image_width = o.image_width;
  info.resize_mode = ToString(o.resize_mode);
  info.compression = ToString(o.compression);
  info.compression_level = o.compression_level;
  info.tokenizer_sha256 = o.tokenizer_sha256;
  info.vocab_size = 30000;
  info.pad_id = 0;
  info.unk_id = 1;
  info.max_tokens = 77;
  info.shards = entries;
  doc.background = "#ffffff";
  doc.build_options = {{"input_format", "jsonl"},
                       {"shard_size", o.shard_size},
                       {"samples_per_shard", o.samples_per_shard}};
  doc.dropped_by_reason = {{"corrupt_image", 1}, {"empty_caption", 1}};
  std::ofstream(fs::path(o.output_dir) / "index.json") << mm::reader::internal::EncodeIndex(doc);
  fs::copy_file(TokenizerModel(), fs::path(o.output_dir) / "tokenizer.model",
                fs::copy_options::overwrite_existing);
}

// Writes index.json for `entries` and expects `mmpack verify` to find the set sound.
void ExpectVerifies(const WriterOptions& o, const std::vector<mm::reader::ShardEntry>& entries) {
  WriteIndex(o, entries);
  std::ostringstream out;
  Status st = RunVerify(o.output_dir, out);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

std::string XxhHex(const std::vector<uint8_t>& bytes) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
  return hex;
}

// RAII for hid_t in tests.
struct H5Closer {
  hid_t id;
  herr_t (*close)(hid_t);
  ~H5Closer() {
    if (id >= 0) close(id);
  }
};

template <typename T>
std::vector<T> ReadAll(hid_t file, const char* name, hid_t mem_type, size_t count) {
  hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
  H5Closer c{d, H5Dclose};
  EXPECT_GE(d, 0) << name;
  std::vector<T> out(count);
  if (count > 0) {
    EXPECT_GE(H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0) << name;
  }
  return out;
}

std::vector<std::string> ReadVlenStrings(hid_t file, const char* name, size_t count) {
  hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
  H5Closer cd{d, H5Dclose};
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Closer ct{t, H5Tclose};
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  std::vector<char*> ptrs(count, nullptr);
  EXPECT_GE(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), 0) << name;
  std::vector<std::string> out;
  for (char* p : ptrs) {
    out.emplace_back(p ? p : "");
    H5free_memory(p);
  }
  return out;
}

std::string ReadStringAttr(hid_t file, const char* name) {
  hid_t a = H5Aopen(file, name, H5P_DEFAULT);
  H5Closer ca{a, H5Aclose};
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Closer ct{t, H5Tclose};
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  char* text = nullptr;
  EXPECT_GE(H5Aread(a, t, &text), 0) << name;
  std::string out = text ? text : "";
  H5free_memory(text);
  return out;
}

int64_t ReadIntAttr(hid_t file, const char* name) {
  hid_t a = H5Aopen(file, name, H5P_DEFAULT);
  H5Closer ca{a, H5Aclose};
  int64_t v = -1;
  EXPECT_GE(H5Aread(a, H5T_NATIVE_INT64, &v), 0) << name;
  return v;
}

// File offset and stored size of image chunk i, as the fast reader learns them.
std::pair<haddr_t, hsize_t> ChunkLocation(const fs::path& shard, hsize_t i) {
  hid_t f = H5Fopen(shard.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  H5Closer cf{f, H5Fclose};
  hid_t d = H5Dopen2(f, "images", H5P_DEFAULT);
  H5Closer cd{d, H5Dclose};
  hsize_t offset[4] = {0, 0, 0, 0};
  unsigned mask = 0;
  haddr_t addr = 0;
  hsize_t size = 0;
  hid_t space = H5Dget_space(d);  // HDF5 1.10.8 refuses H5S_ALL here
  H5Closer cs{space, H5Sclose};
  EXPECT_GE(H5Dget_chunk_info(d, space, i, offset, &mask, &addr, &size), 0);
  EXPECT_EQ(offset[0], i);
  return {addr, size};
}

TEST(CompressImage, WritesZstdFrameWithContentSizeAndRawForNone) {
  const auto& pixels = RealImages().at(0);
  auto zstd = CompressImage(pixels.data(), pixels.size(), format::Codec::kZstd, 3);
  ASSERT_TRUE(zstd.ok()) << zstd.status().ToString();
  EXPECT_EQ(ZSTD_getFrameContentSize(zstd->data(), zstd->size()), pixels.size());
  std::vector<uint8_t> back(pixels.size());
  EXPECT_EQ(ZSTD_decompress(back.data(), back.size(), zstd->data(), zstd->size()), pixels.size());
  EXPECT_EQ(back, pixels);
  auto none = CompressImage(pixels.data(), pixels.size(), format::Codec::kNone, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, pixels);
}

TEST(ShardWriter, RoundTripsPixelsTablesAndAttributesThroughHdf5) {
  TempDir tmp;
  WriterOptions o = Options(tmp.path());
  std::vector<PlainSample> samples;
  for (int i = 0; i < 6; ++i) samples.push_back(MakePlain(i));
  auto entries = WriteSet(o, samples);
  ASSERT_EQ(entries.size(), 1u);
  const auto& e = entries[0];
  fs::path shard = tmp.path() / "shard-000000.h5";
  ASSERT_TRUE(fs::exists(shard));
  EXPECT_FALSE(fs::exists(tmp.path() / "shard-000000.h5.tmp"));
  EXPECT_EQ(e.file, "shard-000000.h5");
  EXPECT_EQ(e.samples, 6);
  EXPECT_EQ(e.bytes, static_cast<int64_t>(fs::file_size(shard)));
  EXPECT_EQ(e.xxh3_64, XxhHex(ReadFile(shard)));

  std::vector<std::string> captions;
  std::vector<int32_t> tokens;
  std::vector<int64_t> caption_offsets = {0}, token_offsets = {0};
  for (const auto& s : samples) {
    for (size_t c = 0; c < s.captions.size(); ++c) {
      captions.push_back(s.captions[c]);
      tokens.insert(tokens.end(), s.tokens[c].begin(), s.tokens[c].end());
      token_offsets.push_back(static_cast<int64_t>(tokens.size()));
    }
    caption_offsets.push_back(static_cast<int64_t>(captions.size()));
  }
  EXPECT_EQ(e.captions, static_cast<int64_t>(captions.size()));
  EXPECT_EQ(e.tokens, static_cast<int64_t>(tokens.size()));

  hid_t f = H5Fopen(shard.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  H5Closer cf{f, H5Fclose};
  // Pixels through HDF5's own read path (filter 32015), bit for bit.
  std::vector<uint8_t> images(samples.size() * kWidth * kHeight * 3);
  {
    hid_t d = H5Dopen2(f, "images", H5P_DEFAULT);
    H5Closer cd{d, H5Dclose};
    ASSERT_GE(H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, images.data()), 0);
    hid_t plist = H5Dget_create_plist(d);
    H5Closer cp{plist, H5Pclose};
    unsigned flags = 0, cd_values[4] = {0};
    size_t nelmts = 4;
    ASSERT_GE(H5Pget_filter_by_id2(plist, 32015, &flags, &nelmts, cd_values, 0, nullptr, nullptr),
              0);
    EXPECT_EQ(nelmts, 1u);
    EXPECT_EQ(cd_values[0], 3u);
    hsize_t chunk[4];
    ASSERT_EQ(H5Pget_chunk(plist, 4, chunk), 4);
    EXPECT_EQ(chunk[0], 1u);
    EXPECT_EQ(chunk[1], static_cast<hsize_t>(kHeight));
    EXPECT_EQ(chunk[2], static_cast<hsize_t>(kWidth));
    EXPECT_EQ(chunk[3], 3u);
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    std::vector<uint8_t> got(images.begin() + i * kWidth * kHeight * 3,
                             images.begin() + (i + 1) * kWidth * kHeight * 3);
    EXPECT_EQ(got, samples[i].pixels) << "sample " << i;
  }
  // Each chunk is one zstd frame at the offset H5Dget_chunk_info reports.
  auto bytes = ReadFile(shard);
  for (hsize_t i = 0; i < samples.size(); ++i) {
    auto [addr, size] = ChunkLocation(shard, i);
    ASSERT_LE(addr + size, bytes.size());
    std::vector<uint8_t> pixels(kWidth * kHeight * 3);
    EXPECT_EQ(ZSTD_decompress(pixels.data(), pixels.size(), bytes.data() + addr, size),
              pixels.size());
    EXPECT_EQ(pixels, samples[i].pixels);
  }

  EXPECT_EQ(ReadAll<int64_t>(f, "caption_offsets", H5T_NATIVE_INT64, samples.size() + 1),
            caption_offsets);
  EXPECT_EQ(ReadAll<int64_t>(f, "token_offsets", H5T_NATIVE_INT64, captions.size() + 1),
            token_offsets);
  EXPECT_EQ(ReadAll<int32_t>(f, "tokens", H5T_NATIVE_INT32, tokens.size()), tokens);
  EXPECT_EQ(ReadVlenStrings(f, "captions", captions.size()), captions);
  std::vector<std::string> sources;
  for (const auto& s : samples) sources.push_back(s.source);
  EXPECT_EQ(ReadVlenStrings(f, "sources", samples.size()), sources);
  auto sizes = ReadAll<int32_t>(f, "original_size", H5T_NATIVE_INT32, samples.size() * 2);
  auto boxes = ReadAll<int32_t>(f, "valid_box", H5T_NATIVE_INT32, samples.size() * 4);
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(sizes[2 * i], samples[i].original[0]);
    EXPECT_EQ(sizes[2 * i + 1], samples[i].original[1]);
    for (int k = 0; k < 4; ++k) EXPECT_EQ(boxes[4 * i + k], samples[i].box[k]);
  }
  {
    hid_t d = H5Dopen2(f, "keys", H5P_DEFAULT);
    H5Closer cd{d, H5Dclose};
    hid_t t = H5Dget_type(d);
    H5Closer ct{t, H5Tclose};
    EXPECT_EQ(H5Tis_variable_str(t), 0);
    EXPECT_EQ(H5Tget_cset(t), H5T_CSET_UTF8);
    EXPECT_EQ(H5Tget_strpad(t), H5T_STR_NULLPAD);
    size_t width = H5Tget_size(t);
    std::vector<char> buffer(width * samples.size());
    ASSERT_GE(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()), 0);
    for (size_t i = 0; i < samples.size(); ++i) {
      EXPECT_EQ(std::string(buffer.data() + i * width, strnlen(buffer.data() + i * width, width)),
                samples[i].key);
    }
  }
  EXPECT_EQ(ReadStringAttr(f, "format"), "mmpack-shard");
  EXPECT_EQ(ReadIntAttr(f, "format_version"), 1);
  EXPECT_EQ(ReadIntAttr(f, "shard_index"), 0);
  EXPECT_EQ(ReadIntAttr(f, "num_samples"), 6);
  EXPECT_EQ(ReadIntAttr(f, "num_captions"), static_cast<int64_t>(captions.size()));
  EXPECT_EQ(ReadIntAttr(f, "image_height"), kHeight);
  EXPECT_EQ(ReadIntAttr(f, "image_width"), kWidth);
  EXPECT_EQ(ReadStringAttr(f, "resize_mode"), "center-crop");
  EXPECT_EQ(ReadStringAttr(f, "compression"), "zstd");
  EXPECT_EQ(ReadStringAttr(f, "tokenizer_sha256"), o.tokenizer_sha256);
}

TEST(ShardWriter, WritesDatasetsWithTheSchemasDtypesAndLayouts) {
  TempDir tmp;
  WriterOptions o = Options(tmp.path());
  auto entries = WriteSet(o, {MakePlain(0), MakePlain(1)});
  ASSERT_EQ(entries.size(), 1u);
  json schema = json::parse(format::SchemaJson());
  hid_t f = H5Fopen((tmp.path() / entries[0].file).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  H5Closer cf{f, H5Fclose};
  H5G_info_t info;
  ASSERT_GE(H5Gget_info(f, &info), 0);
  EXPECT_EQ(info.nlinks, schema["datasets"].size()) << "datasets beyond the schema";
  for (const auto& d : schema["datasets"]) {
    std::string name = d["name"];
    hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    ASSERT_GE(ds, 0) << name;
    H5Closer cd{ds, H5Dclose};
    hid_t t = H5Dget_type(ds);
    H5Closer ct{t, H5Tclose};
    std::string dtype = d["dtype"];
    if (dtype == "uint8") {
      EXPECT_TRUE(H5Tequal(t, H5T_STD_U8LE) > 0) << name;
    }
    if (dtype == "int32") {
      EXPECT_TRUE(H5Tequal(t, H5T_STD_I32LE) > 0) << name;
    }
    if (dtype == "int64") {
      EXPECT_TRUE(H5Tequal(t, H5T_STD_I64LE) > 0) << name;
    }
    if (dtype == "string-vlen") {
      EXPECT_GT(H5Tis_variable_str(t), 0) << name;
    }
    if (dtype == "string-fixed") {
      EXPECT_EQ(H5Tis_variable_str(t), 0) << name;
    }
    hid_t s = H5Dget_space(ds);
    H5Closer cs{s, H5Sclose};
    EXPECT_EQ(static_cast<size_t>(H5Sget_simple_extent_ndims(s)), d["shape"].size()) << name;
    hid_t p = H5Dget_create_plist(ds);
    H5Closer cp{p, H5Pclose};
    if (d["layout"] == "contiguous") {
      EXPECT_EQ(H5Pget_layout(p), H5D_CONTIGUOUS) << name;
    }
    if (d["layout"] == "chunked") {
      EXPECT_EQ(H5Pget_layout(p), H5D_CHUNKED) << name;
    }
  }
  for (const auto& a : schema["root_attributes"]) {
    std::string name = a["name"];
    EXPECT_GT(H5Aexists(f, name.c_str()), 0) << name;
  }
}

TEST(ShardWriter, SameSamplesGiveByteIdenticalShards) {
  TempDir tmp;
  std::vector<PlainSample> samples;
  for (int i = 0; i < 5; ++i) samples.push_back(MakePlain(i));
  WriterOptions a = Options(tmp.Sub("a"));
  a.samples_per_shard = 3;
  WriterOptions b = a;
  b.output_dir = tmp.Sub("b").string();
  auto ea = WriteSet(a, samples);
  // Object timestamps would differ after a second.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  auto eb = WriteSet(b, samples);
  ASSERT_EQ(ea.size(), 2u);
  ASSERT_EQ(eb.size(), 2u);
  for (size_t i = 0; i < ea.size(); ++i) {
    EXPECT_EQ(ea[i].xxh3_64, eb[i].xxh3_64);
    EXPECT_EQ(ReadFile(fs::path(a.output_dir) / ea[i].file),
              ReadFile(fs::path(b.output_dir) / eb[i].file));
  }
}

TEST(ShardWriter, RollsOverAtSamplesPerShard) {
  TempDir tmp;
  WriterOptions o = Options(tmp.path());
  o.samples_per_shard = 3;
  std::vector<PlainSample> samples;
  for (int i = 0; i < 7; ++i) samples.push_back(MakePlain(i));
  auto entries = WriteSet(o, samples);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].samples, 3);
  EXPECT_EQ(entries[1].samples, 3);
  EXPECT_EQ(entries[2].samples, 1);
  for (size_t i = 0; i < entries.size(); ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "shard-%06zu.h5", i);
    EXPECT_EQ(entries[i].file, name);
    hid_t f = H5Fopen((tmp.path() / name).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    H5Closer cf{f, H5Fclose};
    EXPECT_EQ(ReadIntAttr(f, "shard_index"), static_cast<int64_t>(i));
    EXPECT_EQ(ReadIntAttr(f, "num_samples"), entries[i].samples);
  }
  // Keys continue across shards in input order.
  ExpectVerifies(o, entries);
}

TEST(ShardWriter, RollsOverAtShardSize) {
  TempDir tmp;
  WriterOptions o = Options(tmp.path());
  // Uncompressed samples are 3840 bytes of pixels; a 24 KiB shard takes a few of them.
  o.compression = format::Codec::kNone;
  o.shard_size = 24 * 1024;
  std::vector<PlainSample> samples;
  for (int i = 0; i < 10; ++i) samples.push_back(MakePlain(i));
  auto entries = WriteSet(o, samples);
  ASSERT_GE(entries.size(), 3u);
  int64_t total = 0;
  for (const auto& e : entries) {
    EXPECT_GE(e.samples, 1);
    // The writer's estimate of HDF5's overhead keeps a shard within its size, give or take
    // 1 KiB of metadata slack.
    EXPECT_LE(e.bytes, o.shard_size + 1024) << e.file;
    std::printf("%s: %lld samples, %lld bytes\n", e.file.c_str(), static_cast<long long>(e.samples),
                static_cast<long long>(e.bytes));
    total += e.samples;
  }
  EXPECT_EQ(total, 10);
  ExpectVerifies(o, entries);
}

TEST(ShardWriter, OneSampleLargerThanShardSizeGetsAShardOfItsOwn) {
  TempDir tmp;
  WriterOptions o = Options(tmp.path());
  o.shard_size = 1024;  // smaller than any sample
  auto entries = WriteSet(o, {MakePlain(0), MakePlain(1)});
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].samples, 1);
  EXPECT_EQ(entries[1].samples, 1);
}

TEST(ShardWriter, WritesValidShardWithNoTokens) {
  TempDir tmp;
  WriterOptions o = Options(tmp.path());
  auto entries = WriteSet(o, {MakePlain(0, false), MakePlain(1, false)});
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].tokens, 0);
  ExpectVerifies(o, entries);
  hid_t f = H5Fopen((tmp.path() / entries[0].file).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  H5Closer cf{f, H5Fclose};
  hid_t d = H5Dopen2(f, "tokens", H5P_DEFAULT);
  H5Closer cd{d, H5Dclose};
  hid_t s = H5Dget_space(d);
  H5Closer cs{s, H5Sclose};
  hsize_t dims[1] = {99};
  ASSERT_EQ(H5Sget_simple_extent_dims(s, dims, nullptr), 1);
  EXPECT_EQ(dims[0], 0u);
}

TEST(ShardWriter, RejectsMalformedSamplesAndOptions) {
  TempDir tmp;
  WriterOptions o = Options(tmp.path());
  auto writer = ShardWriter::Create(o);
  ASSERT_TRUE(writer.ok());
  EncodedSample wrong_size = Encode(MakePlain(0));
  auto small = CompressImage(wrong_size.image_chunk.data(), 10, format::Codec::kZstd, 3);
  ASSERT_TRUE(small.ok());
  wrong_size.image_chunk = *small;
  EXPECT_EQ((*writer)->Add(std::move(wrong_size)).code(), StatusCode::kInvalidArgument);
  EncodedSample no_caption = Encode(MakePlain(0));
  no_caption.captions.clear();
  no_caption.tokens.clear();
  EXPECT_EQ((*writer)->Add(std::move(no_caption)).code(), StatusCode::kInvalidArgument);
  EncodedSample mismatched = Encode(MakePlain(0));
  mismatched.tokens.pop_back();
  EXPECT_EQ((*writer)->Add(std::move(mismatched)).code(), StatusCode::kInvalidArgument);

  WriterOptions bad = o;
  bad.compression_level = 23;  // above zstd's 22
  EXPECT_EQ(ShardWriter::Create(bad).status().code(), StatusCode::kInvalidArgument);
  bad = o;
  bad.output_dir = (tmp.path() / "missing").string();
  EXPECT_EQ(ShardWriter::Create(bad).status().code(), StatusCode::kIOError);
}

TEST(ShardWriter, RefusesAKeyAlreadyInTheSet) {
  // Keys are unique within the set (FORMAT.md), also across shards.
  TempDir tmp;
  WriterOptions o = Options(tmp.path());
  o.samples_per_shard = 1;
  auto writer = ShardWriter::Create(o);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Add(Encode(MakePlain(0))).ok());
  ASSERT_TRUE((*writer)->Add(Encode(MakePlain(1))).ok());
  EncodedSample again = Encode(MakePlain(2));
  again.key = MakePlain(0).key;  // in the first, already closed shard
  Status st = (*writer)->Add(std::move(again));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("duplicate sample key"), std::string::npos) << st.ToString();
}

TEST(ShardWriter, AbandonedWriterLeavesNoTemporaryFile) {
  TempDir tmp;
  {
    auto writer = ShardWriter::Create(Options(tmp.path()));
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Add(Encode(MakePlain(0))).ok());
    EXPECT_TRUE(fs::exists(tmp.path() / "shard-000000.h5.tmp"));
  }
  EXPECT_FALSE(fs::exists(tmp.path() / "shard-000000.h5.tmp"));
  EXPECT_FALSE(fs::exists(tmp.path() / "shard-000000.h5"));
}

// A written, indexed set of 2 shards (3 + 2 samples) for the verify tests.
class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_ = Options(tmp_.path());
    options_.samples_per_shard = 3;
    std::vector<PlainSample> samples;
    for (int i = 0; i < 5; ++i) samples.push_back(MakePlain(i));
    entries_ = WriteSet(options_, samples);
    ASSERT_EQ(entries_.size(), 2u);
    WriteIndex(options_, entries_);
  }
  Status Verify() {
    out_.str("");
    return RunVerify(options_.output_dir, out_);
  }
  fs::path Shard(int i) const { return tmp_.path() / entries_[static_cast<size_t>(i)].file; }

  TempDir tmp_;
  WriterOptions options_;
  std::vector<mm::reader::ShardEntry> entries_;
  std::ostringstream out_;
};

TEST_F(VerifyTest, AcceptsAWrittenSet) {
  Status st = Verify();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_NE(out_.str().find("verify: OK: 2 shards, 5 samples"), std::string::npos) << out_.str();
}

TEST_F(VerifyTest, CatchesBitFlipInAChunkByChecksum) {
  auto [addr, size] = ChunkLocation(Shard(1), 1);
  auto bytes = ReadFile(Shard(1));
  bytes[addr + size / 2] ^= 0x10;
  WriteFile(Shard(1), bytes);
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("shard-000001.h5"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("sample 1"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, CatchesBitFlipInAChunkByDecodingEvenWhenTheIndexAgrees) {
  auto [addr, size] = ChunkLocation(Shard(0), 2);
  auto bytes = ReadFile(Shard(0));
  bytes[addr + size / 2] ^= 0x01;
  WriteFile(Shard(0), bytes);
  // Rewrite the index with the damaged file's checksum: only decoding can tell now.
  entries_[0].xxh3_64 = XxhHex(bytes);
  WriteIndex(options_, entries_);
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("shard-000000.h5 sample 2 (key 'coco-1002')"), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("decode"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, CatchesTruncatedShard) {
  auto bytes = ReadFile(Shard(1));
  bytes.resize(bytes.size() / 2);
  WriteFile(Shard(1), bytes);
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("shard-000001.h5"), std::string::npos);
  EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, CatchesMissingShard) {
  fs::remove(Shard(1));
  Status st = Verify();
  ASSERT_TRUE(st.IsNotFound()) << st.ToString();
  EXPECT_NE(st.message().find("shard-000001.h5"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, CatchesSampleCountMismatch) {
  entries_[0].samples = 4;
  WriteIndex(options_, entries_);
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("shard-000000.h5"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("num_samples"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, CatchesTotalsMismatchAndMissingIndexKeys) {
  json index = json::parse(std::ifstream(tmp_.path() / "index.json"));
  index["totals"]["captions"] = 1;
  std::ofstream(tmp_.path() / "index.json") << index.dump();
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("totals"), std::string::npos) << st.ToString();
  index.erase("tokenizer");
  std::ofstream(tmp_.path() / "index.json") << index.dump();
  st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("tokenizer"), std::string::npos) << st.ToString();
}

TEST(Verify, CatchesACaptionThatIsNotUtf8) {
  TempDir tmp;
  WriterOptions o = Options(tmp.path());
  PlainSample bad = MakePlain(1);
  bad.captions[1] = "caf\xe9 latin-1";  // the writer stores bytes; verify must notice
  auto entries = WriteSet(o, {MakePlain(0), bad});
  ASSERT_EQ(entries.size(), 1u);
  WriteIndex(o, entries);
  std::ostringstream out;
  Status st = RunVerify(o.output_dir, out);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("sample 1 (key 'coco-1001')"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("UTF-8"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, CatchesAMissingOrChangedTokenizer) {
  fs::path model = tmp_.path() / "tokenizer.model";
  auto bytes = ReadFile(model);
  bytes[bytes.size() / 2] ^= 0x40;
  WriteFile(model, bytes);
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("tokenizer.model: sha256"), std::string::npos) << st.ToString();
  fs::remove(model);
  st = Verify();
  ASSERT_TRUE(st.IsNotFound()) << st.ToString();
  EXPECT_NE(st.message().find("tokenizer.model"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, RefusesAnIndexOfAnotherFormatVersion) {
  json index = json::parse(std::ifstream(tmp_.path() / "index.json"));
  index["format_version"] = 99;
  std::ofstream(tmp_.path() / "index.json") << index.dump();
  Status st = Verify();
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.ToString();
  EXPECT_NE(st.message().find("99"), std::string::npos);
}

TEST_F(VerifyTest, CatchesALeftoverShardBeyondTheIndex) {
  fs::copy_file(Shard(1), tmp_.path() / "shard-000002.h5");
  Status st = Verify();
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find("shard-000002.h5"), std::string::npos) << st.ToString();
}

TEST_F(VerifyTest, InfoPrintsTheSetsFigures) {
  std::ostringstream out;
  Status st = RunInfo(options_.output_dir, out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::string text = out.str();
  EXPECT_NE(text.find("samples:      5 in 2 shards"), std::string::npos) << text;
  EXPECT_NE(text.find("40x32x3"), std::string::npos) << text;
  EXPECT_NE(text.find("zstd level 3"), std::string::npos) << text;
  EXPECT_NE(text.find("sha256 fefb02b6"), std::string::npos) << text;
  EXPECT_NE(text.find("corrupt_image 1"), std::string::npos) << text;
  EXPECT_NE(text.find("vocab 30000"), std::string::npos) << text;
}

TEST(Info, FailsClearlyWithoutAnIndex) {
  TempDir tmp;
  std::ostringstream out;
  EXPECT_TRUE(RunInfo(tmp.path().string(), out).IsNotFound());
  EXPECT_TRUE(RunVerify(tmp.path().string(), out).IsNotFound());
}

TEST(Env, PointsHdf5PluginPathAtTheBuiltPlugin) {
  std::string script = EnvScript();
  EXPECT_NE(script.find(std::string("export HDF5_PLUGIN_PATH='") + MM_PLUGIN_DIR + "'"),
            std::string::npos)
      << script;
  EXPECT_TRUE(fs::exists(fs::path(MM_PLUGIN_DIR) / "libh5z_zstd.so"));
  // The lines work in a shell: h5dump then decodes a zstd chunk.
  TempDir tmp;
  WriterOptions o = Options(tmp.path());
  auto entries = WriteSet(o, {MakePlain(0)});
  ASSERT_EQ(entries.size(), 1u);
  std::ofstream(tmp.path() / "env.sh") << script;
  int rc = 0;
  std::string out = RunCommand(
      "env -u HDF5_PLUGIN_PATH sh -c '. \"$0\" && h5dump -d images -s "
      "0,0,0,0 -c 1,1,1,3 \"$1\"' '" +
          (tmp.path() / "env.sh").string() + "' '" + (tmp.path() / entries[0].file).string() + "'",
      &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("(0,0,0,0): "), std::string::npos) << out;
}

// h5dump loads the plugin from HDF5_PLUGIN_PATH (as `eval "$(mmpack env)"` sets it).
class H5dumpTest : public VerifyTest {
 protected:
  std::string H5dump(const std::string& args, int* rc) {
    return RunCommand("env HDF5_PLUGIN_PATH='" + std::string(MM_PLUGIN_DIR) + "' h5dump " + args +
                          " '" + Shard(0).string() + "'",
                      rc);
  }
};

TEST_F(H5dumpTest, HeaderShowsEveryDatasetAndTheZstdFilter) {
  int rc = 0;
  std::string out = H5dump("-H -p", &rc);
  ASSERT_EQ(rc, 0) << out;
  for (const char* name : {"images", "keys", "sources", "original_size", "valid_box",
                           "caption_offsets", "captions", "token_offsets", "tokens"}) {
    EXPECT_NE(out.find(std::string("DATASET \"") + name + "\""), std::string::npos) << name;
  }
  EXPECT_NE(out.find("FILTER_ID 32015"), std::string::npos) << out;
  EXPECT_NE(out.find("ATTRIBUTE \"format_version\""), std::string::npos) << out;
}

TEST_F(H5dumpTest, PrintsThePixelsOfOneImage) {
  int rc = 0;
  std::string out = H5dump("-d images -s 0,0,0,0 -c 1,2,2,3", &rc);
  ASSERT_EQ(rc, 0) << out;
  const auto& px = MakePlain(0).pixels;
  // h5dump prints one line per pixel: "(0,y,x,0): r, g, b".
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 2; ++x) {
      const uint8_t* p = &px[(y * kWidth + x) * 3];
      std::string line = "(0," + std::to_string(y) + "," + std::to_string(x) +
                         ",0): " + std::to_string(p[0]) + ", " + std::to_string(p[1]) + ", " +
                         std::to_string(p[2]);
      EXPECT_NE(out.find(line), std::string::npos) << out << "\nwanted " << line;
    }
  }
}

TEST_F(H5dumpTest, PrintsNoPixelsWithoutThePlugin) {
  // The filter is optional in the pipeline, so h5dump opens the file but cannot decode.
  int rc = 0;
  std::string out = RunCommand(
      "env HDF5_PLUGIN_PATH=/nonexistent h5dump -d images -s 0,0,0,0 "
      "-c 1,1,1,3 '" +
          Shard(0).string() + "'",
      &rc);
  EXPECT_EQ(out.find("(0,0,0,0):"), std::string::npos) << out;
}

// /usr/bin/python3 with Debian's h5py reads, through the plugin, exactly what the writer wrote.
TEST(H5py, ReadsImagesTokensCaptionsAndKeysAsWritten) {
  TempDir tmp;
  WriterOptions o = Options(tmp.Sub("out"));
  o.samples_per_shard = 4;
  std::vector<PlainSample> samples;
  for (int i = 0; i < 6; ++i) samples.push_back(MakePlain(i));
  samples[5] = MakePlain(5, /*with_tokens=*/false);
  auto entries = WriteSet(o, samples);
  ASSERT_EQ(entries.size(), 2u);
  WriteIndex(o, entries);
  json expected = {{"pixels_file", "pixels.raw"}, {"samples", json::array()}};
  std::vector<uint8_t> pixels;
  for (const auto& s : samples) {
    expected["samples"].push_back({{"key", s.key},
                                   {"source", s.source},
                                   {"captions", s.captions},
                                   {"tokens", s.tokens},
                                   {"original_size", {s.original[0], s.original[1]}},
                                   {"valid_box", {s.box[0], s.box[1], s.box[2], s.box[3]}}});
    pixels.insert(pixels.end(), s.pixels.begin(), s.pixels.end());
  }
  std::ofstream(tmp.path() / "expected.json") << expected.dump();
  WriteFile(tmp.path() / "pixels.raw", pixels);
  int rc = 0;
  std::string out =
      RunCommand("env HDF5_PLUGIN_PATH='" + std::string(MM_PLUGIN_DIR) + "' /usr/bin/python3 '" +
                     std::string(MM_SOURCE_DIR) + "/tests/e2e/h5py_roundtrip.py' '" + o.output_dir +
                     "' --expected '" + (tmp.path() / "expected.json").string() + "'",
                 &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("h5py round trip: OK: 6 samples"), std::string::npos) << out;

  // The script can fail: a changed caption in the expectation is caught.
  expected["samples"][3]["captions"][0] = "something else";
  std::ofstream(tmp.path() / "expected.json") << expected.dump();
  out =
      RunCommand("env HDF5_PLUGIN_PATH='" + std::string(MM_PLUGIN_DIR) + "' /usr/bin/python3 '" +
                     std::string(MM_SOURCE_DIR) + "/tests/e2e/h5py_roundtrip.py' '" + o.output_dir +
                     "' --expected '" + (tmp.path() / "expected.json").string() + "'",
                 &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("shard-000000.h5 sample 3"), std::string::npos) << out;
}

// Writes `chunks` (already encoded) as the chunks of a [n, 4, 4, 3] dataset with filter 32015.
fs::path WriteRawChunks(const fs::path& path, const std::vector<std::vector<uint8_t>>& chunks) {
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  H5Closer cf{f, H5Fclose};
  hsize_t dims[4] = {chunks.size(), 4, 4, 3}, chunk[4] = {1, 4, 4, 3};
  hid_t space = H5Screate_simple(4, dims, nullptr);
  H5Closer cs{space, H5Sclose};
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Closer cp{dcpl, H5Pclose};
  H5Pset_chunk(dcpl, 4, chunk);
  const unsigned level[1] = {3};
  H5Pset_filter(dcpl, 32015, H5Z_FLAG_OPTIONAL, 1, level);
  hid_t d = H5Dcreate2(f, "images", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Closer cd{d, H5Dclose};
  for (hsize_t i = 0; i < chunks.size(); ++i) {
    hsize_t offset[4] = {i, 0, 0, 0};
    EXPECT_GE(H5Dwrite_chunk(d, H5P_DEFAULT, 0, offset, chunks[i].size(), chunks[i].data()), 0);
  }
  return path;
}

TEST(ZstdFilter, DecodesFramesWithoutContentSizeAndFailsCleanlyOnGarbage) {
  TempDir tmp;
  ASSERT_TRUE(ShardWriter::Create(Options(tmp.path())).ok());  // registers the filter
  std::vector<uint8_t> pixels(4 * 4 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7);
  // A streaming frame: no content size in its header (as `zstd` writes from a pipe).
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
  std::vector<uint8_t> frame(ZSTD_compressBound(pixels.size()) + 64);
  ZSTD_inBuffer in{pixels.data(), pixels.size(), 0};
  ZSTD_outBuffer out{frame.data(), frame.size(), 0};
  ASSERT_EQ(ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end), 0u);
  ZSTD_freeCCtx(cctx);
  frame.resize(out.pos);
  ASSERT_EQ(ZSTD_getFrameContentSize(frame.data(), frame.size()), ZSTD_CONTENTSIZE_UNKNOWN);
  std::vector<uint8_t> garbage = {1, 2, 3, 4, 5, 6, 7, 8};
  fs::path file = WriteRawChunks(tmp.path() / "raw.h5", {frame, garbage});

  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  H5Closer cf{f, H5Fclose};
  hid_t d = H5Dopen2(f, "images", H5P_DEFAULT);
  H5Closer cd{d, H5Dclose};
  hid_t space = H5Dget_space(d);
  H5Closer cs{space, H5Sclose};
  hsize_t start[4] = {0, 0, 0, 0}, count[4] = {1, 4, 4, 3};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hid_t mem = H5Screate_simple(4, count, nullptr);
  H5Closer cm{mem, H5Sclose};
  std::vector<uint8_t> back(pixels.size());
  ASSERT_GE(H5Dread(d, H5T_NATIVE_UINT8, mem, space, H5P_DEFAULT, back.data()), 0);
  EXPECT_EQ(back, pixels);
  // The garbage chunk: the read fails with the filter's error on HDF5's stack, no crash.
  start[0] = 1;
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  EXPECT_LT(H5Dread(d, H5T_NATIVE_UINT8, mem, space, H5P_DEFAULT, back.data()), 0);
  H5Eclear2(H5E_DEFAULT);
}

// The plugin's encoder: h5py compresses with filter 32015 (loaded from HDF5_PLUGIN_PATH); the
// frames decode here, bit for bit.
TEST(ZstdFilter, PluginCompressesWhatH5pyWrites) {
  TempDir tmp;
  ASSERT_TRUE(ShardWriter::Create(Options(tmp.path())).ok());
  fs::path file = tmp.path() / "h5py.h5";
  int rc = 0;
  std::string out = RunCommand(
      "env HDF5_PLUGIN_PATH='" + std::string(MM_PLUGIN_DIR) +
          "' /usr/bin/python3 -c 'import h5py, numpy as np, sys\n"
          "a = (np.arange(3 * 8 * 8 * 3) % 251).astype(np.uint8).reshape(3, 8, 8, 3)\n"
          "with h5py.File(sys.argv[1], \"w\") as f:\n"
          "    f.create_dataset(\"images\", data=a, chunks=(1, 8, 8, 3), compression=32015, "
          "compression_opts=(5,))\n' '" +
          file.string() + "'",
      &rc);
  ASSERT_EQ(rc, 0) << out;
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  H5Closer cf{f, H5Fclose};
  hid_t d = H5Dopen2(f, "images", H5P_DEFAULT);
  H5Closer cd{d, H5Dclose};
  std::vector<uint8_t> back(3 * 8 * 8 * 3);
  ASSERT_GE(H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, back.data()), 0);
  for (size_t i = 0; i < back.size(); ++i) ASSERT_EQ(back[i], i % 251) << i;
  // The stored chunk is a plain zstd frame.
  hsize_t offset[4] = {1, 0, 0, 0};
  hsize_t stored = 0;
  ASSERT_GE(H5Dget_chunk_storage_size(d, offset, &stored), 0);
  std::vector<uint8_t> raw(stored);
  uint32_t mask = 0;
  ASSERT_GE(H5Dread_chunk(d, H5P_DEFAULT, offset, &mask, raw.data()), 0);
  EXPECT_EQ(ZSTD_getFrameContentSize(raw.data(), raw.size()), 8u * 8 * 3);
}

}  // namespace
}  // namespace mm::pack
