// The reader on shard sets built by the real `mmpack build` from real data, checked against
// h5py (HDF5's own read path through the zstd plugin) for every sample.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "mm/reader.h"
#include "shard_fixture.h"

namespace mm::reader {
namespace {

using mm::testing::ReadFile;
using mm::testing::SharedDir;
using mm::testing::TempDir;

std::string Quote(const std::string& s) { return "'" + s + "'"; }

std::string MmpackBin() {
  const char* env = std::getenv("MM_BIN_DIR");
  return std::string(env ? env : MM_BIN_DIR) + "/mmpack";
}

// Runs `mmpack build INPUT -o OUT EXTRA`; true on success.
bool Build(const std::string& input, const std::string& out, const std::string& extra) {
  std::string cmd = Quote(MmpackBin()) + " build " + Quote(input) + " -o " + Quote(out) +
                    " --tokenizer " + Quote(SharedDir() + "/tokenizers/albert-30k-clean.model") +
                    " --lowercase -q -j 2 " + extra + " > " + Quote(out + ".log") + " 2>&1";
  int rc = std::system(cmd.c_str());
  if (rc != 0) std::fprintf(stderr, "%s\n%s\n", cmd.c_str(), ReadFile(out + ".log").c_str());
  return rc == 0;
}

// Compares every sample of `dir` read by the reader with h5py's dump of it.
void ExpectEqualsH5py(const std::string& dir, const TempDir& tmp) {
  std::string prefix = tmp / "h5py";
  std::string env = std::string("HDF5_PLUGIN_PATH=") + Quote(MM_PLUGIN_DIR) + " ";
#ifdef MM_ASAN_RUNTIME
  // A sanitizer build: the plugin h5py loads is instrumented, so Python needs the ASan runtime
  // first (and its own leaks are not ours).
  env += std::string("LD_PRELOAD=") + Quote(MM_ASAN_RUNTIME) + " ASAN_OPTIONS=detect_leaks=0 ";
#endif
  std::string cmd = env + Quote(MM_PYTHON) + " " +
                    Quote(std::string(MM_SOURCE_DIR) + "/tests/reader/h5py_dump.py") + " " +
                    Quote(dir) + " " + Quote(prefix);
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  OpenOptions verify;
  verify.verify_checksums = true;
  auto set = ShardSet::Open(dir, verify);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  const ShardSet& s = *set.value();
  std::string images = ReadFile(prefix + ".bin");
  ASSERT_EQ(images.size(), s.image_bytes() * s.num_samples());
  auto meta = nlohmann::json::parse(ReadFile(prefix + ".json"));
  ASSERT_EQ(static_cast<int64_t>(meta.size()), s.num_samples());
  std::vector<uint8_t> buf(s.image_bytes());
  for (int64_t i = 0; i < s.num_samples(); ++i) {
    ASSERT_TRUE(s.ReadImage(i, buf.data()).ok()) << s.Locate(i);
    ASSERT_EQ(0, std::memcmp(buf.data(), images.data() + i * buf.size(), buf.size()))
        << s.Locate(i);
    EXPECT_EQ(s.Key(i), meta[i]["key"].get<std::string>());
    ASSERT_EQ(s.NumCaptions(i), static_cast<int>(meta[i]["tokens"].size()));
    for (int c = 0; c < s.NumCaptions(i); ++c) {
      auto t = s.Tokens(i, c);
      EXPECT_EQ(std::vector<int32_t>(t.begin(), t.end()),
                meta[i]["tokens"][c].get<std::vector<int32_t>>());
    }
  }
}

TEST(MmpackSet, ReaderEqualsH5pyOnCocoInSeveralShards) {
  TempDir tmp;
  std::string out = tmp / "coco";
  ASSERT_TRUE(Build(SharedDir() + "/data/coco-cc/captions.jsonl", out,
                    "--samples-per-shard 16 --compression zstd"));
  ExpectEqualsH5py(out, tmp);
  auto set = ShardSet::Open(out);
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set.value()->info().shards.size(), 4u);
  EXPECT_EQ(set.value()->num_samples(), 51);
}

TEST(MmpackSet, ReaderEqualsH5pyOnMixedModesAndUncompressed) {
  // skimage-micro: PNG and JPEG, RGB, L and RGBA; no compression, padded, 96x64.
  TempDir tmp;
  std::string zstd = tmp / "zstd", none = tmp / "none";
  std::string input = SharedDir() + "/data/skimage-micro/captions.jsonl";
  ASSERT_TRUE(Build(input, zstd, "--image-size 96x64 --resize-mode pad --compression zstd"));
  ASSERT_TRUE(Build(input, none, "--image-size 96x64 --resize-mode pad --compression none"));
  ExpectEqualsH5py(none, tmp);
  auto a = ShardSet::Open(zstd), b = ShardSet::Open(none);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  EXPECT_EQ(b.value()->info().compression, mm::format::Codec::kNone);
  std::vector<uint8_t> x(a.value()->image_bytes()), y(b.value()->image_bytes());
  for (int64_t i = 0; i < a.value()->num_samples(); ++i) {
    ASSERT_TRUE(a.value()->ReadImage(i, x.data()).ok());
    ASSERT_TRUE(b.value()->ReadImage(i, y.data()).ok());
    EXPECT_EQ(x, y) << i;
    EXPECT_EQ(b.value()->StoredImageBytes(i), static_cast<int64_t>(y.size()));
  }
}

TEST(MmpackSet, ReaderEqualsH5pyOnClipArt) {
  // openclipart-pd: RGBA, palette, L, bilevel, extreme aspect ratios, non-ASCII captions.
  TempDir tmp;
  std::string out = tmp / "clipart";
  ASSERT_TRUE(Build(SharedDir() + "/data/openclipart-pd/captions.jsonl", out,
                    "--image-size 48 --resize-mode pad --samples-per-shard 100"));
  ExpectEqualsH5py(out, tmp);
}

// Format 2 (--codec jpeg, keep-ratio): the same layout learned in process and in the forked
// query (OpenOptions::isolate_hdf5), each sample at its own size; and a mixture of a raw and a
// jpeg set, whose loader decodes each sample by its own shard's codec.
TEST(MmpackSet, JpegSetOpensAlikeIsolatedAndMixesWithARawSet) {
  TempDir tmp;
  const std::string input = SharedDir() + "/data/openclipart-pd/captions.jsonl";
  const std::string jpeg = tmp / "jpeg", raw = tmp / "raw";
  ASSERT_TRUE(Build(input, jpeg,
                    "--codec jpeg --resize-mode keep-ratio-largest --max-size 64 "
                    "--samples-per-shard 100"));
  ASSERT_TRUE(Build(input, raw, "--image-size 64"));
  OpenOptions isolated;
  isolated.isolate_hdf5 = true;
  auto a = ShardSet::Open(jpeg), b = ShardSet::Open(jpeg, isolated);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  const ShardSet& x = *a.value();
  const ShardSet& y = *b.value();
  EXPECT_EQ(x.info().format_version, 2);
  EXPECT_EQ(x.info().image_codec, mm::format::ImageCodec::kJpeg);
  EXPECT_EQ(x.info().max_size, 64);
  ASSERT_EQ(x.num_shards(), 4u);
  std::set<std::pair<int, int>> sizes;
  std::vector<uint8_t> p, q;
  for (int64_t i = 0; i < x.num_samples(); ++i) {
    int w = 0, h = 0, w2 = 0, h2 = 0;
    x.ImageSize(i, &w, &h);
    y.ImageSize(i, &w2, &h2);
    ASSERT_EQ(std::make_pair(w, h), std::make_pair(w2, h2)) << x.Locate(i);
    EXPECT_LE(std::max(w, h), 64) << x.Locate(i);
    sizes.insert({w, h});
    EXPECT_EQ(x.StoredImageBytes(i), y.StoredImageBytes(i));
    p.resize(static_cast<size_t>(w) * h * 3);
    q.resize(p.size());
    ASSERT_TRUE(x.ReadImage(i, p.data()).ok()) << x.Locate(i);
    ASSERT_TRUE(y.ReadImage(i, q.data()).ok()) << x.Locate(i);
    ASSERT_EQ(p, q) << x.Locate(i);
  }
  EXPECT_GT(sizes.size(), 10u) << "clip art of many aspect ratios";

  auto mix = ShardSet::Open(raw + ":0.5," + jpeg + ":0.5");
  ASSERT_TRUE(mix.ok()) << mix.status().ToString();
  LoaderOptions o;
  o.batch_size = 16;
  o.crop = ImageCrop::kRandomResized;
  o.output_height = o.output_width = 48;
  o.horizontal_flip = true;
  auto loader = Loader::Create(mix.value(), o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  int64_t rows = 0;
  for (;;) {
    auto batch = loader.value()->Next();
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.value()) break;
    EXPECT_EQ(batch.value()->images.size(), 16u * 48 * 48 * 3);
    rows += batch.value()->size;
  }
  EXPECT_EQ(rows, loader.value()->batches_per_epoch() * 16);
  EXPECT_GT(rows, 300);
}

TEST(MmpackSet, LoaderReadsAllCaptionPairsOfABuiltSet) {
  TempDir tmp;
  std::string out = tmp / "coco";
  ASSERT_TRUE(Build(SharedDir() + "/data/coco-cc/captions.jsonl", out, "--image-size 32"));
  auto set = ShardSet::Open(out);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  LoaderOptions o;
  o.batch_size = 15;
  o.caption_mode = CaptionMode::kAllCaptions;
  auto loader = Loader::Create(set.value(), o);
  ASSERT_TRUE(loader.ok());
  std::set<std::pair<int64_t, int>> pairs;
  for (;;) {
    auto b = loader.value()->Next();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    if (!b.value()) break;
    for (int j = 0; j < b.value()->size; ++j) {
      pairs.insert({b.value()->indices[j], b.value()->caption[j]});
      EXPECT_GT(b.value()->lengths[j], 0);
    }
  }
  EXPECT_EQ(pairs.size(), 255u);  // 255 = 17 batches of 15, nothing dropped
}

TEST(MmpackSet, ShowWritesPngAndPrintsCaptions) {
  TempDir tmp;
  std::string out = tmp / "coco";
  ASSERT_TRUE(Build(SharedDir() + "/data/coco-cc/captions.jsonl", out, "--image-size 64"));
  std::string png = tmp / "s.png", log = tmp / "show.txt";
  std::string cmd = Quote(MmpackBin()) + " show " + Quote(out) + " 7 -o " + Quote(png) + " > " +
                    Quote(log) + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << ReadFile(log);
  std::string text = ReadFile(log);
  EXPECT_NE(text.find("key: "), std::string::npos) << text;
  EXPECT_NE(text.find("caption 4: "), std::string::npos) << text;
  EXPECT_NE(text.find("tokens ("), std::string::npos) << text;
  std::string bytes = ReadFile(png);
  ASSERT_GT(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  // The loader's view: a random-resized crop at 32x32, flipped per (seed, epoch, sample): the
  // PNG's pixels (decoded by Pillow) are LoadSampleImage's under the same options.
  cmd = Quote(MmpackBin()) + " show " + Quote(out) +
        " 7 --crop rrc --size 32 --flip --seed 3 --epoch 2 -o " + Quote(png) + " > " + Quote(log) +
        " 2>&1 && " + Quote(MM_PYTHON) +
        " -c 'import sys; from PIL import Image; "
        "open(sys.argv[2], \"wb\").write(Image.open(sys.argv[1]).convert(\"RGB\").tobytes())' " +
        Quote(png) + " " + Quote(tmp / "s.rgb");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << ReadFile(log);
  EXPECT_NE(ReadFile(log).find("loader crop rrc flip seed 3 epoch 2: 32x32"), std::string::npos)
      << ReadFile(log);
  auto set = ShardSet::Open(out);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  LoaderOptions lo;
  lo.crop = ImageCrop::kRandomResized;
  lo.output_height = lo.output_width = 32;
  lo.horizontal_flip = true;
  lo.seed = 3;
  std::vector<uint8_t> want;
  int h = 0, w = 0;
  ASSERT_TRUE(LoadSampleImage(*set.value(), lo, 2, 7, &want, &h, &w).ok());
  EXPECT_EQ(ReadFile(tmp / "s.rgb"), std::string(want.begin(), want.end()));
  // Out of range: a clear error, non-zero exit.
  cmd = Quote(MmpackBin()) + " show " + Quote(out) + " 51 -o " + Quote(png) + " > " + Quote(log) +
        " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(ReadFile(log).find("OutOfRange"), std::string::npos) << ReadFile(log);
}

TEST(MmpackSet, BenchPrintsOneJsonObject) {
  TempDir tmp;
  std::string out = tmp / "coco";
  ASSERT_TRUE(Build(SharedDir() + "/data/coco-cc/captions.jsonl", out, "--image-size 64"));
  std::string log = tmp / "bench.json";
  std::string cmd = Quote(MmpackBin()) + " bench " + Quote(out) +
                    " --seconds 0.3 --batch-size 8 --threads 2 --json > " + Quote(log);
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto j = nlohmann::json::parse(ReadFile(log));
  for (const char* key : {"samples_per_s", "mb_per_s", "cpu_ms_per_sample", "peak_anon_rss_mb"}) {
    ASSERT_TRUE(j.contains(key)) << key;
    EXPECT_GT(j[key].get<double>(), 0.0) << key;
  }
}

}  // namespace
}  // namespace mm::reader
