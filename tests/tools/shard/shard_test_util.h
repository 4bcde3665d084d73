// shard_test_util.h: shards written by the real ShardWriter from real pixels, for the tests of
// the writer, verify, info, env and the zstd filter. Pixels are COCO photos from
// MM_SHARED_DIR/data/coco-cc, decoded and resized by the `vips` command (libvips, as mmpack
// uses it) into raw RGB bytes; the tokenizer's SHA-256 comes from sha256sum (an independent
// implementation). In mm::pack::testing, declared into mm::pack like pack_test_util.h.
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "commands/commands.h"
#include "mm/format.h"
#include "mm/internal/index_json.h"
#include "pack_test_util.h"
#include "shard/shard_writer.h"

namespace mm::pack::testing {

inline constexpr int kWidth = 40;  // pixels; small so that tests stay fast
inline constexpr int kHeight = 32;

inline std::string RunCommand(const std::string& command, int* exit_code) {
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

inline std::vector<uint8_t> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void WriteFile(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// Real COCO photos, centre-cropped to kWidth x kHeight by libvips: [kHeight, kWidth, 3] uint8.
inline const std::vector<std::vector<uint8_t>>& RealImages() {
  static std::vector<std::vector<uint8_t>> images = [] {
    std::vector<std::vector<uint8_t>> out;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator((DataDir() / "coco-cc" / "images"))) {
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
inline PlainSample MakePlain(int i, bool with_tokens = true) {
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

inline EncodedSample Encode(const PlainSample& p,
                            format::Codec compression = format::Codec::kZstd) {
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

inline std::string TokenizerModel() { return AlbertModel(); }

// sha256 of the real tokenizer, by the sha256sum command (an independent implementation).
inline const std::string& TokenizerSha256() {
  static const std::string sha = [] {
    int rc = 0;
    std::string out = RunCommand("sha256sum '" + TokenizerModel() + "'", &rc);
    EXPECT_EQ(rc, 0) << out;
    return out.substr(0, 64);
  }();
  return sha;
}

inline WriterOptions Options(const fs::path& dir) {
  WriterOptions o;
  o.output_dir = dir.string();
  o.image_width = kWidth;
  o.image_height = kHeight;
  o.tokenizer_sha256 = TokenizerSha256();
  o.compression_level = 3;  // not the default, so the tests see the requested level stored
  return o;
}

inline std::vector<mm::reader::ShardEntry> WriteSet(const WriterOptions& options,
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
inline void WriteIndex(const WriterOptions& o, const std::vector<mm::reader::ShardEntry>& entries) {
  mm::reader::internal::IndexDocument doc;
  mm::reader::SetInfo& info = doc.info;
  info.image_height = o.image_height;
  info.image_width = o.image_width;
  info.resize_mode = o.resize_mode;
  info.compression = o.compression;
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
inline void ExpectVerifies(const WriterOptions& o,
                           const std::vector<mm::reader::ShardEntry>& entries) {
  WriteIndex(o, entries);
  std::ostringstream out;
  Status st = RunVerify(o.output_dir, out);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

inline std::string XxhHex(const std::vector<uint8_t>& bytes) {
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

inline std::vector<std::string> ReadVlenStrings(hid_t file, const char* name, size_t count) {
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

inline std::string ReadStringAttr(hid_t file, const char* name) {
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

inline int64_t ReadIntAttr(hid_t file, const char* name) {
  hid_t a = H5Aopen(file, name, H5P_DEFAULT);
  H5Closer ca{a, H5Aclose};
  int64_t v = -1;
  EXPECT_GE(H5Aread(a, H5T_NATIVE_INT64, &v), 0) << name;
  return v;
}

// File offset and stored size of image chunk i, as the fast reader learns them.
inline std::pair<haddr_t, hsize_t> ChunkLocation(const fs::path& shard, hsize_t i) {
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

/// A written, indexed set of 2 shards (3 + 2 samples): the verify, info and h5dump tests.
class WrittenSetTest : public ::testing::Test {
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

}  // namespace mm::pack::testing

namespace mm::pack {

using testing::ChunkLocation;
using testing::Encode;
using testing::ExpectVerifies;
using testing::H5Closer;
using testing::kHeight;
using testing::kWidth;
using testing::MakePlain;
using testing::Options;
using testing::PlainSample;
using testing::ReadAll;
using testing::ReadFile;
using testing::ReadIntAttr;
using testing::ReadStringAttr;
using testing::ReadVlenStrings;
using testing::RealImages;
using testing::RunCommand;
using testing::TokenizerModel;
using testing::TokenizerSha256;
using testing::WriteFile;
using testing::WriteIndex;
using testing::WriteSet;
using testing::WrittenSetTest;
using testing::XxhHex;

}  // namespace mm::pack
