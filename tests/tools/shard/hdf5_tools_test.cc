// Shards as other HDF5 programs read them: h5dump and Debian's h5py (/usr/bin/python3), both
// through the zstd filter plugin (reader/plugin), and the plugin's own encoder and decoder.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "shard/shard_test_util.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// h5dump loads the plugin from HDF5_PLUGIN_PATH (as `eval "$(mmpack env)"` sets it).
class H5dumpTest : public WrittenSetTest {
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
