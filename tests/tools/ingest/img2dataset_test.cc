// Tests of ingest.h's img2dataset and Hugging Face layouts: WebDataset tars whose samples carry
// a .json member (fields kept, captions from a field), brace lists of tars, and an imagefolder
// with metadata.jsonl / metadata.csv. The tars and folders are made by Python's tarfile from
// the real coco-cc images.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ingest/ingest.h"
#include "pack_test_util.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

// Two img2dataset-style tars, shards-00000.tar and shards-00001.tar, of 4 samples each from
// coco-cc: key.jpg, key.txt ("txt i") and key.json ({"url", "caption": "json i", "similarity":
// i / 10, "punsafe", "key"}), except: sample 2 has no .json member, sample 5's .json is not
// JSON, sample 6's .json has no "caption" and a null similarity.
class Img2Dataset : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    int rc = 0;
    const std::string log = RunPython(R"(
import io, json, os, tarfile
src = )" + Py(DataDir() / "coco-cc") + R"(
t = )" + Py(tmp_->path()) + R"(
images = sorted({json.loads(l)['image'] for l in open(os.path.join(src, 'captions.jsonl'))})[:8]
def add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
for s in range(2):
    with tarfile.open(os.path.join(t, 'shards-%05d.tar' % s), 'w') as tar:
        for i in range(4 * s, 4 * s + 4):
            key = '%09d' % i
            tar.add(os.path.join(src, images[i]), arcname=key + '.jpg')
            add(tar, key + '.txt', ('txt %d' % i).encode())
            meta = {'url': 'https://example.com/%d.jpg' % i, 'caption': 'json %d' % i,
                    'similarity': i / 10, 'punsafe': 0.01 * i, 'key': key}
            if i == 6:
                del meta['caption']
                meta['similarity'] = None
            if i == 2:
                continue
            add(tar, key + '.json', b'{"url": "cut' if i == 5 else json.dumps(meta).encode())
folder = os.path.join(t, 'imagefolder')
os.makedirs(os.path.join(folder, 'train'))
with open(os.path.join(folder, 'metadata.jsonl'), 'w') as f:
    for i, img in enumerate(images[:3]):
        name = os.path.join('train', os.path.basename(img))
        os.link(os.path.join(src, img), os.path.join(folder, name))
        f.write(json.dumps({'file_name': name, 'text': 'hf %d' % i}) + '\n')
csv_folder = os.path.join(t, 'imagefolder_csv')
os.makedirs(csv_folder)
with open(os.path.join(csv_folder, 'metadata.csv'), 'w') as f:
    f.write('file_name,caption\n')
    for i, img in enumerate(images[:2]):
        os.link(os.path.join(src, img), os.path.join(csv_folder, os.path.basename(img)))
        f.write('%s,csv %d\n' % (os.path.basename(img), i))
)",
                                      &rc);
    ASSERT_EQ(rc, 0) << log;
  }
  static void TearDownTestSuite() { delete tmp_; }
  static std::string Path(const std::string& name) { return (tmp_->path() / name).string(); }
  static TempDir* tmp_;
};
TempDir* Img2Dataset::tmp_ = nullptr;

std::vector<std::string> Keys(const IngestResult& r) {
  std::vector<std::string> keys;
  for (const RawSample& s : r.samples) keys.push_back(s.key);
  return keys;
}

const IngestIssue* IssueOf(const IngestResult& r, const std::string& reason) {
  for (const IngestIssue& issue : r.issues) {
    if (issue.reason == reason) return &issue;
  }
  return nullptr;
}

TEST_F(Img2Dataset, JsonFieldsAreKeptBesideTheTxtCaptions) {
  FieldNames names;
  names.extra = {"similarity", "url", "absent"};
  auto r = Ingest(tmp_->path().string(), InputFormat::kAuto, names);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, InputFormat::kWds);
  // Sample 5's .json is not JSON: reported, the other 7 kept (sample 2 without a .json member
  // keeps its caption, its fields missing).
  ASSERT_EQ(r->samples.size(), 7u);
  const IngestIssue* bad = IssueOf(*r, "invalid_manifest_line");
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->source, "shards-00001.tar:000000005.json");
  EXPECT_EQ(bad->key, "000000005");
  for (const RawSample& s : r->samples) {
    const int i = std::stoi(s.key.substr(s.key.find_last_of('/') + 1));
    ASSERT_EQ(s.captions, std::vector<std::string>{"txt " + std::to_string(i)}) << s.key;
    ASSERT_EQ(s.fields.size(), 3u);
    EXPECT_EQ(s.fields[2].type, FieldValue::Type::kMissing);
    if (i == 2 || i == 6) {
      EXPECT_EQ(s.fields[0].type, FieldValue::Type::kMissing) << s.key;  // none / null
    } else {
      ASSERT_EQ(s.fields[0].type, FieldValue::Type::kFloat) << s.key;
      EXPECT_DOUBLE_EQ(s.fields[0].f, i / 10.0);
    }
    if (i == 2) {
      EXPECT_EQ(s.fields[1].type, FieldValue::Type::kMissing);
    } else {
      ASSERT_EQ(s.fields[1].type, FieldValue::Type::kString);
      EXPECT_EQ(s.fields[1].s, "https://example.com/" + std::to_string(i) + ".jpg");
    }
  }
}

TEST_F(Img2Dataset, CaptionFieldReadsCaptionsFromTheJsonMember) {
  FieldNames names;
  names.caption = {"caption"};
  auto r = Ingest(tmp_->path().string(), InputFormat::kAuto, names);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // 2 (no .json), 5 (not JSON) and 6 (no caption field) are issues; the .txt is not used.
  std::vector<std::string> captions;
  for (const RawSample& s : r->samples) captions.push_back(s.captions.at(0));
  EXPECT_EQ(captions, (std::vector<std::string>{"json 0", "json 1", "json 3", "json 4", "json 7"}));
  const IngestIssue* missing = IssueOf(*r, "missing_caption");
  ASSERT_NE(missing, nullptr);
  EXPECT_NE(missing->detail.find("no string field caption"), std::string::npos) << missing->detail;
  int missing_captions = 0;
  for (const IngestIssue& issue : r->issues) missing_captions += issue.reason == "missing_caption";
  EXPECT_EQ(missing_captions, 2);
}

TEST_F(Img2Dataset, WithoutFieldsTheJsonMembersAreNotRead) {
  auto r = Ingest(Path("shards-00001.tar"), InputFormat::kAuto);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->samples.size(), 4u);  // sample 5's broken .json does not matter
  EXPECT_TRUE(r->issues.empty());
}

TEST_F(Img2Dataset, BraceListReadsItsTarsInOrderAndReportsTheMissingOne) {
  auto r = Ingest(Path("shards-{00001..00002}.tar"), InputFormat::kAuto);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, InputFormat::kWds);
  EXPECT_EQ(Keys(*r),
            (std::vector<std::string>{"000000004", "000000005", "000000006", "000000007"}));
  ASSERT_EQ(r->issues.size(), 1u);
  EXPECT_EQ(r->issues[0].reason, "missing_file");
  EXPECT_EQ(r->issues[0].source, Path("shards-00002.tar"));
  auto both = Ingest(Path("shards-{00001,00000}.tar"), InputFormat::kAuto);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(both->samples.size(), 8u);
  EXPECT_EQ(both->samples[0].source, "shards-00001.tar:000000004.jpg");  // the list's order
  auto none = Ingest(Path("nope-{0..3}.tar"), InputFormat::kAuto);
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(none.status().IsNotFound()) << none.status().ToString();
  auto as_jsonl = Ingest(Path("shards-{00001..00002}.tar"), InputFormat::kJsonl);
  ASSERT_FALSE(as_jsonl.ok());
  EXPECT_TRUE(as_jsonl.status().code() == StatusCode::kInvalidArgument)
      << as_jsonl.status().ToString();
}

TEST_F(Img2Dataset, HuggingFaceImagefolderReadsItsMetadataFile) {
  ASSERT_EQ(*DetectInputFormat(Path("imagefolder")), InputFormat::kJsonl);
  auto r = Ingest(Path("imagefolder"), InputFormat::kAuto);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->samples.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r->samples[i].captions, std::vector<std::string>{"hf " + std::to_string(i)});
    EXPECT_EQ(r->samples[i].source.rfind("train/", 0), 0u) << r->samples[i].source;
    EXPECT_TRUE(fs::is_regular_file(r->samples[i].path)) << r->samples[i].path;
  }
  ASSERT_EQ(*DetectInputFormat(Path("imagefolder_csv")), InputFormat::kCsv);
  auto csv = Ingest(Path("imagefolder_csv"), InputFormat::kAuto);
  ASSERT_TRUE(csv.ok()) << csv.status().ToString();
  ASSERT_EQ(csv->samples.size(), 2u);
  EXPECT_EQ(csv->samples[1].captions, std::vector<std::string>{"csv 1"});
}

}  // namespace
}  // namespace mm::pack
