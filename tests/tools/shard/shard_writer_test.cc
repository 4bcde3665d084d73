// Tests of shard/shard_writer.h: CompressImage and ShardWriter against HDF5's own read path
// and the schema (schemas/shard_v1.json).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <zstd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "shard/shard_test_util.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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
  size_t raw_datasets = 0;
  for (const auto& d : schema["datasets"]) raw_datasets += d.value("codec", "raw") == "raw";
  EXPECT_EQ(info.nlinks, raw_datasets) << "datasets beyond the schema";
  for (const auto& d : schema["datasets"]) {
    if (d.value("codec", "raw") != "raw") continue;  // codec jpeg's (format 2)
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
    EXPECT_EQ(H5Aexists(f, name.c_str()) > 0, a.value("codec", "raw") == "raw") << name;
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

}  // namespace
}  // namespace mm::pack
