// Tests of ingest.h: every input format built from the real coco-cc / skimage-micro sets
// gives the same samples (keys, captions in order, resolvable images), in a deterministic
// order; bad manifest lines are reported, not fatal.
#include "ingest/ingest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "pack_test_util.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

// stem of the image file -> captions, from a set's captions.jsonl (via Python's json).
std::map<std::string, std::vector<std::string>> Expected(const fs::path& jsonl) {
  int rc = 0;
  std::string out = RunPython(R"(
import json, os, sys
for line in open()" + Py(jsonl) + R"(, encoding='utf-8'):
    d = json.loads(line)
    stem = os.path.splitext(os.path.basename(d['image']))[0]
    sys.stdout.buffer.write(stem.encode() + b'\0' + d['text'].encode('utf-8') + b'\0')
)",
                              &rc);
  EXPECT_EQ(rc, 0);
  std::map<std::string, std::vector<std::string>> want;
  size_t i = 0;
  while (i < out.size()) {
    size_t a = out.find('\0', i), b = out.find('\0', a + 1);
    want[out.substr(i, a - i)].push_back(out.substr(a + 1, b - a - 1));
    i = b + 1;
  }
  return want;
}

std::map<std::string, std::vector<std::string>> ByStem(const IngestResult& r) {
  std::map<std::string, std::vector<std::string>> got;
  for (const RawSample& s : r.samples) {
    std::string name = s.tar_member.empty() ? s.path : s.tar_member;
    got[fs::path(name).stem().string()] = s.captions;
  }
  return got;
}

// Compares sample captions by image stem, printing only the first difference.
void ExpectSameCaptions(const std::map<std::string, std::vector<std::string>>& got,
                        const std::map<std::string, std::vector<std::string>>& want) {
  EXPECT_EQ(got.size(), want.size());
  for (const auto& [stem, caps] : want) {
    auto it = got.find(stem);
    if (it == got.end()) {
      ADD_FAILURE() << "no sample for " << stem;
      return;
    }
    if (it->second != caps) {
      ADD_FAILURE() << stem << ": " << it->second.size() << " captions, want " << caps.size()
                    << "; first: '" << (it->second.empty() ? "" : it->second[0]) << "' want '"
                    << caps[0] << "'";
      return;
    }
  }
}

void ExpectReadable(const IngestResult& r) {
  ImageReader reader;
  for (const RawSample& s : r.samples) {
    std::string bytes;
    ASSERT_TRUE(reader.Read(s, &bytes).ok()) << s.source;
    ASSERT_GT(bytes.size(), 100u) << s.source;
    EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0xFF) << s.source;  // JPEG
  }
}

class IngestFormats : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    coco_ = DataDir() / "coco-cc";
    want_ = new std::map<std::string, std::vector<std::string>>(Expected(coco_ / "captions.jsonl"));
    // CSV, TSV, a folder of pairs and a WebDataset tar made from coco-cc by Python.
    int rc = 0;
    std::string log = RunPython(R"(
import csv, io, json, os, shutil, tarfile
src = )" + Py(coco_) + R"(
t = )" + Py(tmp_->path()) + R"(
rows = [json.loads(l) for l in open(os.path.join(src, 'captions.jsonl'), encoding='utf-8')]
with open(os.path.join(t, 'pairs.csv'), 'w', newline='', encoding='utf-8') as f:
    w = csv.writer(f)
    w.writerow(['image', 'caption', 'license'])
    for r in rows:
        w.writerow([os.path.join(src, r['image']), r['text'] + ', "quoted"\nsecond line', r['license']])
with open(os.path.join(t, 'pairs.tsv'), 'w', encoding='utf-8') as f:
    f.write('file_name\ttext\n')
    for r in rows:
        # TSV cannot hold a newline inside a field: one coco caption has one.
        f.write(os.path.join(src, r['image']) + '\t' + r['text'].replace('\n', ' ') + '\n')
first = {}
for r in rows:
    first.setdefault(r['image'], []).append(r['text'])
files = os.path.join(t, 'files')
for i, (img, caps) in enumerate(sorted(first.items())):
    d = os.path.join(files, 'part%d' % (i % 3))
    os.makedirs(d, exist_ok=True)
    stem = os.path.splitext(os.path.basename(img))[0]
    shutil.copy(os.path.join(src, img), os.path.join(d, stem + '.jpg'))
    open(os.path.join(d, stem + '.txt'), 'w', encoding='utf-8').write('\n'.join(caps) + '\n')
with tarfile.open(os.path.join(t, 'shard-000.tar'), 'w') as tar:
    for img, caps in first.items():
        stem = os.path.splitext(os.path.basename(img))[0]
        tar.add(os.path.join(src, img), arcname='d/' + stem + '.jpg')
        for k, c in enumerate(caps):
            data = (c + '\n').encode('utf-8')
            info = tarfile.TarInfo('d/' + stem + ('.txt' if k == 0 else '.%d.caption' % k))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
)",
                                &rc);
    ASSERT_EQ(rc, 0) << log;
  }
  static void TearDownTestSuite() {
    delete tmp_;
    delete want_;
  }
  static TempDir* tmp_;
  static fs::path coco_;
  static std::map<std::string, std::vector<std::string>>* want_;
};
TempDir* IngestFormats::tmp_ = nullptr;
fs::path IngestFormats::coco_;
std::map<std::string, std::vector<std::string>>* IngestFormats::want_ = nullptr;

TEST_F(IngestFormats, JsonlGroupsCaptionsInFirstAppearanceOrder) {
  auto r = Ingest((coco_ / "captions.jsonl").string(), InputFormat::kAuto);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, InputFormat::kJsonl);
  EXPECT_TRUE(r->issues.empty());
  ASSERT_EQ(r->samples.size(), 51u);
  ExpectSameCaptions(ByStem(*r), *want_);
  EXPECT_EQ(r->samples[0].source, "images/train2017_000000000790.jpg");
  EXPECT_EQ(r->samples[0].key, "images/train2017_000000000790");
  EXPECT_EQ(r->samples[0].path, (coco_ / "images/train2017_000000000790.jpg").string());
  ExpectReadable(*r);
}

TEST_F(IngestFormats, CocoCaptionsJson) {
  auto r = Ingest((coco_ / "captions_coco.json").string(), InputFormat::kAuto);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, InputFormat::kCoco);
  EXPECT_TRUE(r->issues.empty());
  ASSERT_EQ(r->samples.size(), 51u);
  // file_names are relative to coco-cc/images/: found there.
  ExpectSameCaptions(ByStem(*r), *want_);
  ExpectReadable(*r);
}

TEST_F(IngestFormats, CsvWithQuotedFieldsAndTsv) {
  auto csv = Ingest((tmp_->path() / "pairs.csv").string(), InputFormat::kAuto);
  ASSERT_TRUE(csv.ok()) << csv.status().ToString();
  EXPECT_EQ(csv->format, InputFormat::kCsv);
  ASSERT_EQ(csv->samples.size(), 51u);
  auto want = *want_;
  for (auto& [stem, caps] : want) {
    for (auto& c : caps) c += ", \"quoted\"\nsecond line";
  }
  ExpectSameCaptions(ByStem(*csv), want);
  auto tsv = Ingest((tmp_->path() / "pairs.tsv").string(), InputFormat::kAuto);
  ASSERT_TRUE(tsv.ok()) << tsv.status().ToString();
  EXPECT_EQ(tsv->format, InputFormat::kTsv);
  auto want_tsv = *want_;
  for (auto& [stem, caps] : want_tsv) {
    for (auto& c : caps) std::replace(c.begin(), c.end(), '\n', ' ');
  }
  ExpectSameCaptions(ByStem(*tsv), want_tsv);
  ExpectReadable(*tsv);
}

TEST_F(IngestFormats, FolderOfPairsIsSortedAndWholeTxtIsOneCaption) {
  auto r = Ingest((tmp_->path() / "files").string(), InputFormat::kAuto);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, InputFormat::kFiles);
  ASSERT_EQ(r->samples.size(), 51u);
  std::vector<std::string> keys;
  for (const RawSample& s : r->samples) {
    keys.push_back(s.key);
    ASSERT_EQ(s.captions.size(), 1u);
    // The file held the captions joined by newlines plus one trailing newline.
    std::string joined;
    for (const auto& c : want_->at(fs::path(s.path).stem().string())) {
      joined += (joined.empty() ? "" : "\n") + c;
    }
    EXPECT_EQ(s.captions[0], joined);
    EXPECT_EQ(s.key, s.source.substr(0, s.source.size() - 4));
  }
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(keys[0].rfind("part0/", 0), 0u);
  ExpectReadable(*r);
}

TEST_F(IngestFormats, WebDatasetTarGroupsMembersByKey) {
  auto r = Ingest((tmp_->path() / "shard-000.tar").string(), InputFormat::kAuto);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, InputFormat::kWds);
  ASSERT_EQ(r->samples.size(), 51u);
  // key = member path up to the first dot of the base name; the .txt and .N.caption members
  // all belong to it, in member order.
  auto got = ByStem(*r);
  ExpectSameCaptions(got, *want_);
  EXPECT_EQ(r->samples[0].key, "d/train2017_000000000790");
  EXPECT_EQ(r->samples[0].source, "shard-000.tar:d/train2017_000000000790.jpg");
  ExpectReadable(*r);
  // Reading backwards reopens the tar and still finds the member.
  ImageReader reader;
  std::string last, first;
  ASSERT_TRUE(reader.Read(r->samples.back(), &last).ok());
  ASSERT_TRUE(reader.Read(r->samples.front(), &first).ok());
  EXPECT_EQ(first, ReadBytes(coco_ / "images/train2017_000000000790.jpg"));
}

TEST(Ingest, BadManifestLinesAreReportedAndSkipped) {
  TempDir tmp;
  WriteBytes(tmp / "m.jsonl",
             "{\"image\": \"a.jpg\", \"text\": \"one\"}\n"
             "this is not json\n"
             "\n"
             "{\"image\": \"b.jpg\"}\n"
             "{\"file_name\": \"b.jpg\", \"caption\": \"two\"}\n"
             "{\"image\": \"a.jpg\", \"text\": \"caf\xff bad\"}\n"
             "[1, 2]\n"
             "{\"image_path\": \"a.jpg\", \"text\": \"three\"}\r\n");
  auto r = Ingest((tmp / "m.jsonl").string(), InputFormat::kAuto);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->samples.size(), 2u);
  EXPECT_EQ(r->samples[0].source, "a.jpg");
  ASSERT_EQ(r->samples[0].captions.size(), 3u);
  EXPECT_EQ(r->samples[0].captions[0], "one");
  EXPECT_NE(r->samples[0].captions[1].find('\xff'), std::string::npos)
      << "the caption with raw invalid bytes stays invalid for the caption check";
  EXPECT_EQ(r->samples[0].captions[2], "three");
  EXPECT_EQ(r->samples[1].captions, std::vector<std::string>{"two"});
  ASSERT_EQ(r->issues.size(), 3u);
  EXPECT_EQ(r->issues[0].source, "m.jsonl:2");
  EXPECT_EQ(r->issues[0].reason, "invalid_manifest_line");
  EXPECT_EQ(r->issues[1].source, "m.jsonl:4");
  EXPECT_EQ(r->issues[2].source, "m.jsonl:7");
}

TEST(Ingest, FolderReportsUnpairedFiles) {
  TempDir tmp;
  WriteBytes(tmp / "a.jpg", "x");
  WriteBytes(tmp / "a.txt", "caption a\r\n");
  WriteBytes(tmp / "b.png", "x");
  WriteBytes(tmp / "sub" / "c.txt", "lonely");
  WriteBytes(tmp / "sub" / "d.JPEG", "x");
  WriteBytes(tmp / "sub" / "d.txt", "\xEF\xBB\xBFwith bom\n\n");
  WriteBytes(tmp / "notes.md", "ignored");
  auto r = Ingest(tmp.path().string(), InputFormat::kAuto);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->samples.size(), 2u);
  EXPECT_EQ(r->samples[0].key, "a");
  EXPECT_EQ(r->samples[0].captions[0], "caption a");
  EXPECT_EQ(r->samples[1].key, "sub/d");
  EXPECT_EQ(r->samples[1].captions[0], "with bom\n");  // one trailing newline removed
  ASSERT_EQ(r->issues.size(), 2u);
  EXPECT_EQ(r->issues[0].reason, "missing_caption");  // b.png
  EXPECT_EQ(r->issues[1].reason, "missing_file");     // sub/c.txt
}

TEST(Ingest, ASetFolderWithOneManifestReadsTheManifest) {
  // coco-cc/ holds captions.jsonl and captions_coco.json beside images/: the .jsonl wins.
  auto r = Ingest((DataDir() / "coco-cc").string(), InputFormat::kAuto);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, InputFormat::kJsonl);
  EXPECT_EQ(r->samples.size(), 51u);
  EXPECT_TRUE(r->issues.empty());
  // Forced to "files" it is a folder of pairs (none: every image lacks its .txt).
  auto files = Ingest((DataDir() / "skimage-micro").string(), InputFormat::kFiles);
  ASSERT_TRUE(files.ok());
  EXPECT_TRUE(files->samples.empty());
  EXPECT_EQ(files->issues.size(), 6u);
}

TEST(Ingest, CocoEntriesWithTheSameFileAreOneSample) {
  // Two `images` ids naming one file are one image: one sample with the captions of both ids,
  // in annotation order (two samples with the same key would be a set verify rejects).
  TempDir tmp;
  WriteBytes(tmp / "c.json",
             R"({"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "b.jpg"},
                            {"id": 3, "file_name": "a.jpg"}],
                 "annotations": [{"image_id": 3, "caption": "from three"},
                                 {"image_id": 2, "caption": "bee"},
                                 {"image_id": 1, "caption": "from one"}]})");
  auto r = Ingest((tmp / "c.json").string(), InputFormat::kCoco);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->samples.size(), 2u);
  EXPECT_EQ(r->samples[0].key, "a");
  EXPECT_EQ(r->samples[0].captions, (std::vector<std::string>{"from three", "from one"}));
  EXPECT_EQ(r->samples[1].key, "b");
  EXPECT_TRUE(r->issues.empty());
}

TEST(Ingest, KeysAreUniqueEvenWhereTheKeyRulesCollide) {
  // "a.jpg.png" strips to "a.jpg", which is also the key "a.jpg" and "a.png" fall back to.
  TempDir tmp;
  WriteBytes(tmp / "m.jsonl",
             "{\"image\": \"a.jpg\", \"text\": \"one\"}\n"
             "{\"image\": \"a.png\", \"text\": \"two\"}\n"
             "{\"image\": \"a.jpg.png\", \"text\": \"three\"}\n");
  auto r = Ingest((tmp / "m.jsonl").string(), InputFormat::kJsonl);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->samples.size(), 3u);
  EXPECT_EQ(r->samples[0].key, "a.jpg");
  EXPECT_EQ(r->samples[1].key, "a.png");
  EXPECT_EQ(r->samples[2].key, "a.jpg#2");
}

TEST(Ingest, DetectsFormatsAndRefusesTheUnknown) {
  TempDir tmp;
  WriteBytes(tmp / "x.parquet", "PAR1");
  EXPECT_FALSE(DetectInputFormat((tmp / "x.parquet").string()).ok());
  EXPECT_TRUE(DetectInputFormat((tmp / "nope").string()).status().IsNotFound());
  WriteBytes(tmp / "lines.json", "{\"image\": \"a.jpg\", \"text\": \"t\"}\n");
  EXPECT_EQ(*DetectInputFormat((tmp / "lines.json").string()), InputFormat::kJsonl);
  auto bad_csv = Ingest((tmp / "x.parquet").string(), InputFormat::kCsv);
  EXPECT_FALSE(bad_csv.ok());  // no image/text header
}

TEST(InputFormat, NamesAreWhatTheReportStoresAndParseBack) {
  const char* names[] = {"auto", "files", "jsonl", "csv", "tsv", "coco", "wds", "feed"};
  ASSERT_EQ(std::size(kInputFormats), std::size(names));
  for (size_t i = 0; i < std::size(names); ++i) {
    EXPECT_EQ(ToString(kInputFormats[i]), names[i]);
    EXPECT_EQ(ParseInputFormat(names[i]), kInputFormats[i]);
  }
  EXPECT_FALSE(ParseInputFormat("JSONL").has_value());
  EXPECT_FALSE(ParseInputFormat("parquet").has_value());
}

}  // namespace
}  // namespace mm::pack
