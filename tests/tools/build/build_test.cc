// Tests of RunBuild (build/build.h) end to end through the library: real data in, shards out,
// read back with Debian's h5py (an independent reader); bad inputs skipped and reported;
// byte-identical output at any thread count; the path checks that refuse at once.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "mm/internal/checksum.h"
#include "pack_test_util.h"
#include "text/tokenizer.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

BuildOptions Options(const fs::path& raw, const fs::path& out) {
  BuildOptions o;
  o.input = raw.string();
  o.output = out.string();
  o.tokenizer = AlbertModel();
  o.threads = 2;
  o.quiet = true;
  return o;
}

// Every sample of a shard set as h5py reads it: key, source, captions, tokens, box, size.
json ReadWithH5py(const fs::path& out) {
  setenv("HDF5_PLUGIN_PATH", MM_PLUGIN_DIR, 0);
  int rc = 0;
  std::string text = RunPython(R"(
import glob, json, os
import h5py, numpy as np
out = )" + Py(out) + R"(
samples = []
for f in sorted(glob.glob(os.path.join(out, 'shard-*.h5'))):
    with h5py.File(f, 'r') as h:
        co, to = h['caption_offsets'][:], h['token_offsets'][:]
        caps, toks = h['captions'][:], h['tokens'][:]
        for i in range(h['images'].shape[0]):
            img = h['images'][i]
            c = [x.decode('utf-8') if isinstance(x, bytes) else x for x in caps[co[i]:co[i + 1]]]
            t = [toks[to[k]:to[k + 1]].tolist() for k in range(co[i], co[i + 1])]
            key = h['keys'][i]
            src = h['sources'][i]
            samples.append({'key': key.decode('utf-8') if isinstance(key, bytes) else key,
                            'source': src.decode('utf-8') if isinstance(src, bytes) else src,
                            'captions': c, 'tokens': t,
                            'valid_box': h['valid_box'][i].tolist(),
                            'original_size': h['original_size'][i].tolist(),
                            'image_mean': float(img.mean()), 'shape': list(img.shape)})
print(json.dumps(samples))
)",
                               &rc);
  EXPECT_EQ(rc, 0) << text;
  return json::parse(text, nullptr, false);
}

json ReadJson(const fs::path& path) { return json::parse(ReadBytes(path), nullptr, false); }

// source -> captions, in manifest order.
std::map<std::string, std::vector<std::string>> ManifestCaptions(const fs::path& jsonl) {
  std::map<std::string, std::vector<std::string>> want;
  std::string text = ReadBytes(jsonl);
  size_t i = 0;
  while (i < text.size()) {
    size_t nl = text.find('\n', i);
    json line = json::parse(text.substr(i, nl - i));
    want[line["image"].get<std::string>()].push_back(line["text"].get<std::string>());
    i = nl == std::string::npos ? text.size() : nl + 1;
  }
  return want;
}

TEST(RunBuild, CocoJsonlEveryCaptionArrivesByteForByte) {
  TempDir tmp;
  const fs::path raw = DataDir() / "coco-cc" / "captions.jsonl";
  ASSERT_TRUE(RunBuild(Options(raw, tmp / "out")).ok());
  json samples = ReadWithH5py(tmp / "out");
  ASSERT_TRUE(samples.is_array());
  auto want = ManifestCaptions(raw);
  ASSERT_EQ(samples.size(), want.size());
  auto tok = Tokenizer::FromFile(AlbertModel());
  ASSERT_TRUE(tok.ok());
  for (const json& s : samples) {
    const std::string source = s["source"];
    ASSERT_EQ(s["captions"].get<std::vector<std::string>>(), want[source]) << source;
    EXPECT_EQ(s["key"], source.substr(0, source.size() - 4));
    EXPECT_EQ(s["shape"], json({224, 224, 3}));
    EXPECT_EQ(s["valid_box"], json({0, 0, 224, 224}));
    EXPECT_GT(s["image_mean"].get<double>(), 5.0);
    for (size_t c = 0; c < want[source].size(); ++c) {
      EXPECT_EQ(s["tokens"][c].get<std::vector<int32_t>>(),
                (*tok)->Encode(want[source][c], 77)->ids);
    }
  }
  json index = ReadJson(tmp / "out" / "index.json");
  EXPECT_EQ(index["totals"]["samples"], 51);
  EXPECT_EQ(index["totals"]["captions"], 255);
  EXPECT_EQ(index["tokenizer"]["sha256"], Sha256Hex(ReadBytes(AlbertModel())));
  EXPECT_EQ(index["tokenizer"]["trained"], false);
  EXPECT_EQ(index["build_options"]["input_format"], "jsonl");
  EXPECT_EQ(index["dropped"]["total"], 0);
  EXPECT_EQ(ReadBytes(tmp / "out" / "tokenizer.model"), ReadBytes(AlbertModel()));
  json report = ReadJson(tmp / "out" / "report.json");
  EXPECT_EQ(report["samples_seen"], 51);
  EXPECT_EQ(report["samples_written"], 51);
  EXPECT_TRUE(report["dropped"].empty());
  EXPECT_FALSE(fs::exists(tmp / "out.mmpack-partial"));
}

TEST(RunBuild, OutputIsByteIdenticalForOneAndTwoThreads) {
  TempDir tmp;
  // skimage (PNG/JPEG, grey, RGBA) + openclipart subset via a folder-free JSONL manifest,
  // several shards.
  const fs::path raw = DataDir() / "skimage-micro" / "captions.jsonl";
  BuildOptions one = Options(raw, tmp / "one");
  one.threads = 1;
  one.samples_per_shard = 2;
  one.tokenizer.clear();  // the trained tokenizer must be deterministic too
  one.vocab_size = 64;
  BuildOptions two = one;
  two.output = (tmp / "two").string();
  two.threads = 2;
  ASSERT_TRUE(RunBuild(one).ok());
  ASSERT_TRUE(RunBuild(two).ok());
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(tmp / "one")) {
    files.push_back(e.path().filename().string());
  }
  ASSERT_GE(files.size(), 6u);  // 3 shards + index + report + tokenizer
  for (const std::string& f : files) {
    EXPECT_EQ(ReadBytes(tmp / "one" / f), ReadBytes(tmp / "two" / f)) << f;
  }
  json index = ReadJson(tmp / "one" / "index.json");
  EXPECT_EQ(index["shards"].size(), 3u);
  EXPECT_EQ(index["tokenizer"]["trained"], true);
  EXPECT_EQ(index["tokenizer"]["bos_id"], 2);
  EXPECT_EQ(index["tokenizer"]["eos_id"], 3);
  json samples = ReadWithH5py(tmp / "one");
  ASSERT_EQ(samples.size(), 6u);
  for (const json& s : samples) {
    for (const json& t : s["tokens"]) {
      EXPECT_EQ(t.front(), 2);
      EXPECT_EQ(t.back(), 3);
      EXPECT_LE(t.size(), 77u);
    }
  }
}

TEST(RunBuild, BadSamplesAreSkippedReportedAndGoodOnesKept) {
  TempDir tmp;
  const fs::path coco = DataDir() / "coco-cc" / "images";
  std::vector<fs::path> photos;
  for (const auto& e : fs::directory_iterator(coco)) photos.push_back(e.path());
  std::sort(photos.begin(), photos.end());
  const fs::path raw = tmp / "raw";
  fs::create_directories(raw / "images");
  std::string jpeg = ReadBytes(photos[2]);
  WriteBytes(raw / "images" / "truncated.jpg", jpeg.substr(0, jpeg.size() / 2));
  WriteBytes(raw / "images" / "random.jpg", std::string(3000, '\x5a'));
  WriteBytes(raw / "images" / "empty.jpg", "");
  WriteBytes(raw / "images" / "drawing.svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"/>");
  int rc = 0;
  RunPython("from PIL import Image\nImage.new('L', (3000, 2000)).save(" +
                Py(raw / "images" / "big.png") + ")\n",
            &rc);
  ASSERT_EQ(rc, 0);
  for (int i = 0; i < 4; ++i) fs::copy_file(photos[i], raw / "images" / photos[i].filename());
  auto line = [](const std::string& image, const std::string& text) {
    return json({{"image", image}, {"text", text}}).dump() + "\n";
  };
  std::string manifest;
  const std::string g0 = "images/" + photos[0].filename().string();
  const std::string g1 = "images/" + photos[1].filename().string();
  const std::string g2 = "images/" + photos[2].filename().string();
  const std::string g3 = "images/" + photos[3].filename().string();
  manifest += line(g0, "first, 第一");
  manifest += line("images/missing.jpg", "no such file");
  manifest += line("images/truncated.jpg", "cut in half");
  manifest += line(g1, "   ");                    // its only caption is blank
  manifest += line(g2, "kept \xF0\x9F\x90\xB1");  // emoji
  manifest += line(g2, "");                       // dropped caption, sample kept
  manifest += line("images/random.jpg", "random bytes");
  manifest += line("images/empty.jpg", "zero bytes");
  manifest += line("images/drawing.svg", "vector");
  manifest += line("images/big.png", "six megapixels");
  manifest += "{\"image\": \"" + g3 + "\", \"text\": \"bad \xC3\x28 utf8\"}\n";
  manifest += "not json at all\n";
  WriteBytes(raw / "m.jsonl", manifest);
  BuildOptions o = Options(raw / "m.jsonl", tmp / "out");
  o.max_pixels = 5'000'000;
  ASSERT_TRUE(RunBuild(o).ok());

  json report = ReadJson(tmp / "out" / "report.json");
  std::map<std::string, std::string> reasons;
  for (const json& d : report["dropped"]) reasons[d["source"]] = d["reason"];
  const std::map<std::string, std::string> want = {
      {"images/missing.jpg", "missing_file"},
      {"images/truncated.jpg", "truncated_image"},
      {g1, "empty_caption"},
      {"images/random.jpg", "unsupported_format"},
      {"images/empty.jpg", "corrupt_image"},
      {"images/drawing.svg", "unsupported_format"},
      {"images/big.png", "too_many_pixels"},
      {g3, "invalid_utf8"},
      {"m.jsonl:12", "invalid_manifest_line"},
  };
  EXPECT_EQ(reasons, want);
  EXPECT_EQ(report["samples_written"], 2);
  EXPECT_EQ(report["samples_seen"], 11);
  EXPECT_EQ(report["dropped_by_reason"]["unsupported_format"], 2);
  ASSERT_EQ(report["dropped_captions"].size(), 3u);  // blank, empty, invalid
  json index = ReadJson(tmp / "out" / "index.json");
  EXPECT_EQ(index["dropped"]["total"], 9);
  EXPECT_EQ(index["dropped"]["by_reason"], report["dropped_by_reason"]);

  json samples = ReadWithH5py(tmp / "out");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0]["source"], g0);
  EXPECT_EQ(samples[0]["captions"], json({"first, 第一"}));
  EXPECT_EQ(samples[1]["source"], g2);
  EXPECT_EQ(samples[1]["captions"], json({"kept \xF0\x9F\x90\xB1"}));
}

TEST(RunBuild, RefusesBadPathsAtOnceAndOverwriteReplaces) {
  TempDir tmp;
  const fs::path skimage = DataDir() / "skimage-micro" / "captions.jsonl";
  Status missing = RunBuild(Options(tmp / "no_such_input", tmp / "o1"));
  EXPECT_TRUE(missing.IsNotFound()) << missing.ToString();
  EXPECT_NE(missing.message().find("no_such_input"), std::string::npos);
  fs::create_directories(tmp / "empty_dir");
  EXPECT_EQ(RunBuild(Options(tmp / "empty_dir", tmp / "o1")).code(), StatusCode::kInvalidArgument);
  WriteBytes(tmp / "empty.jsonl", "");
  EXPECT_EQ(RunBuild(Options(tmp / "empty.jsonl", tmp / "o1")).code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(tmp / "o1"));
  WriteBytes(tmp / "a_file", "x");
  EXPECT_EQ(RunBuild(Options(skimage, tmp / "a_file" / "sub")).code(), StatusCode::kIOError);
  EXPECT_EQ(ReadBytes(tmp / "a_file"), "x");

  ASSERT_TRUE(RunBuild(Options(skimage, tmp / "out")).ok());
  WriteBytes(tmp / "out" / "marker", "old");
  Status exists = RunBuild(Options(skimage, tmp / "out"));
  EXPECT_EQ(exists.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(exists.message().find("--overwrite"), std::string::npos);
  EXPECT_TRUE(fs::exists(tmp / "out" / "marker"));
  BuildOptions again = Options(skimage, tmp / "out");
  again.overwrite = true;
  // A file the set does not list is someone's: --overwrite refuses.
  Status unlisted = RunBuild(again);
  EXPECT_EQ(unlisted.code(), StatusCode::kAlreadyExists) << unlisted.ToString();
  EXPECT_NE(unlisted.message().find("marker"), std::string::npos) << unlisted.ToString();
  EXPECT_TRUE(fs::exists(tmp / "out" / "marker"));
  fs::remove(tmp / "out" / "marker");
  ASSERT_TRUE(RunBuild(again).ok());
  EXPECT_TRUE(fs::exists(tmp / "out" / "index.json"));
}

TEST(RunBuild, WebDatasetTarAndPadMode) {
  TempDir tmp;
  int rc = 0;
  std::string log = RunPython(R"(
import io, json, os, tarfile
src = )" + Py(DataDir() / "skimage-micro") +
                                  R"(
rows = [json.loads(l) for l in open(os.path.join(src, 'captions.jsonl'), encoding='utf-8')]
with tarfile.open()" + Py(tmp / "set.tar") +
                                  R"(, 'w') as tar:
    seen = {}
    for r in rows:
        stem, ext = os.path.splitext(os.path.basename(r['image']))
        if stem not in seen:
            tar.add(os.path.join(src, r['image']), arcname=stem + ext)
        seen[stem] = seen.get(stem, 0) + 1
        data = r['text'].encode('utf-8')
        info = tarfile.TarInfo(stem + ('.txt' if seen[stem] == 1 else '.%d.txt' % seen[stem]))
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
)",
                              &rc);
  ASSERT_EQ(rc, 0) << log;
  BuildOptions o = Options(tmp / "set.tar", tmp / "out");
  o.resize_mode = format::ResizeMode::kPad;
  o.image_width = 160;
  o.image_height = 96;
  ASSERT_TRUE(RunBuild(o).ok());
  json samples = ReadWithH5py(tmp / "out");
  ASSERT_EQ(samples.size(), 6u);
  for (const json& s : samples) {
    EXPECT_EQ(s["captions"].size(), 2u) << s["source"];
    EXPECT_EQ(s["shape"], json({96, 160, 3}));
    const int w = s["original_size"][0], h = s["original_size"][1];
    const double scale = std::min(160.0 / w, 96.0 / h);
    EXPECT_NEAR(s["valid_box"][2].get<int>(), w * scale, 1.0) << s["source"];
    EXPECT_NEAR(s["valid_box"][3].get<int>(), h * scale, 1.0) << s["source"];
  }
  EXPECT_EQ(ReadJson(tmp / "out" / "index.json")["build_options"]["input_format"], "wds");
}

}  // namespace
}  // namespace mm::pack
