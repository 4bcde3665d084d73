// Tests of ingest/spill.h, ingest/sample_list.h and the external grouping and key rules of
// ingest/keys.h: with sort memory small enough that every sort spills many runs (and merges
// them in more than one level), results equal the in-memory ones: order, stability, grouping of
// far-apart lines, AssignKeys' and MakeKeysUnique's rules.
#include "ingest/spill.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ingest/ingest.h"
#include "ingest/keys.h"
#include "ingest/sample_list.h"
#include "pack_test_util.h"

namespace mm::pack {
namespace {

// Sorts `records` with an ExternalSorter of `memory` bytes; the output and the runs it spilled.
std::pair<std::vector<std::pair<std::string, std::string>>, int> Sorted(
    const std::vector<std::pair<std::string, std::string>>& records, const TempDir& dir,
    size_t memory) {
  ExternalSorter sorter(dir.path(), memory);
  for (const auto& [k, p] : records) EXPECT_TRUE(sorter.Add(k, p).ok());
  EXPECT_TRUE(sorter.Finish().ok());
  std::vector<std::pair<std::string, std::string>> out;
  std::string k, p;
  for (;;) {
    auto more = sorter.Next(&k, &p);
    EXPECT_TRUE(more.ok());
    if (!more.ok() || !*more) break;
    out.emplace_back(k, p);
  }
  return {out, sorter.runs()};
}

TEST(ExternalSorter, SortsByKeyKeepingAddedOrderAmongEqualKeysInMemoryAndSpilled) {
  TempDir dir;
  std::mt19937 rng(3);
  std::vector<std::pair<std::string, std::string>> records;
  for (int i = 0; i < 20000; ++i) {
    std::string key(1 + rng() % 6, 'a');
    for (char& c : key) c = static_cast<char>('a' + rng() % 4);  // many equal keys
    if (i % 97 == 0) key.push_back('\0');                        // keys are bytes
    records.emplace_back(key, std::to_string(i) + std::string(rng() % 40, 'x'));
  }
  std::vector<std::pair<std::string, std::string>> want = records;
  std::stable_sort(want.begin(), want.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto [in_memory, no_runs] = Sorted(records, dir, size_t{64} << 20);
  EXPECT_EQ(no_runs, 0);
  EXPECT_EQ(in_memory, want);
  // 8 KiB runs: hundreds of them, merged 32 at a time in two levels.
  const auto [spilled, runs] = Sorted(records, dir, 8192);
  EXPECT_GT(runs, 0);
  EXPECT_EQ(spilled, want);
  EXPECT_EQ(Sorted({}, dir, 8192).first.size(), 0u);
}

// Many more runs than the process may open files: runs are merged kMaxFanIn at a time as they
// come, so open files stay bounded (with 64 allowed, 20,000 records in 4 KiB runs).
TEST(ExternalSorter, ManyRunsStayWithinTheOpenFileLimit) {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> records;
  for (int i = 0; i < 20000; ++i) {
    records.emplace_back(std::to_string((i * 7919) % 20000), std::string(20, 'x'));
  }
  std::vector<std::pair<std::string, std::string>> want = records;
  std::stable_sort(want.begin(), want.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  struct rlimit low = old;
  low.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  const auto [spilled, runs] = Sorted(records, dir, 4096);
  ::setrlimit(RLIMIT_NOFILE, &old);
  EXPECT_GT(runs, 64);  // more runs than files may be open at once
  EXPECT_EQ(spilled, want);
}

// TextKey orders (text, n) as std::string orders the texts, and keeps one text's records
// together, whatever bytes the texts hold: NULs and the bytes of a length included.
TEST(ExternalSorter, TextKeysOrderAsTheTextsWithNulBytes) {
  using namespace std::string_literals;
  const std::vector<std::string> texts = {
      "a.png"s, "a.png\0\0\0\0\0\0\0\x05\0\0\0\0\0\0\0\x01"s, "a"s, ""s, "\0"s, "\0\xff"s, "a\0b"s,
      "a\xff"s};
  std::vector<std::pair<std::string, uint64_t>> items;
  for (uint64_t n = 0; n < 4; ++n) {
    for (const std::string& t : texts) items.emplace_back(t, n);
  }
  std::vector<std::pair<std::string, uint64_t>> by_key = items;
  std::sort(by_key.begin(), by_key.end(), [](const auto& a, const auto& b) {
    return TextKey(a.first, a.second) < TextKey(b.first, b.second);
  });
  std::sort(items.begin(), items.end());
  EXPECT_EQ(by_key, items);
  for (const std::string& t : texts) EXPECT_EQ(TextOf(TextKey(t, 7)), t);
}

TEST(SampleList, RoundTripsEveryFieldAndReadsFromAnyPosition) {
  TempDir dir;
  auto list = SampleList::Create(dir.path());
  ASSERT_TRUE(list.ok());
  std::vector<RawSample> want;
  for (int i = 0; i < 10000; ++i) {
    RawSample s;
    s.key = "k" + std::to_string(i);
    s.source = "images/" + std::to_string(i) + ".jpg";
    s.path = "/data/" + s.source;
    s.tar_member = i % 3 ? "" : "m" + std::to_string(i);
    s.tar_member_index = i % 3 ? -1 : i;
    s.captions = {"caption " + std::to_string(i), std::string(i % 5, '\0')};
    FieldValue f;
    f.type = static_cast<FieldValue::Type>(i % 4);
    f.i = -i;
    f.f = i / 3.0;
    f.s = "s" + std::to_string(i);
    s.fields = {f, FieldValue()};
    ASSERT_TRUE((*list)->Add(s).ok());
    want.push_back(s);
  }
  ASSERT_TRUE((*list)->Finish().ok());
  ASSERT_EQ((*list)->size(), want.size());
  for (size_t from :
       {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{9999}, size_t{10000}}) {
    auto c = (*list)->From(from);
    ASSERT_TRUE(c.ok());
    size_t i = from;
    for (RawSample s;; ++i) {
      auto more = c->Next(&s);
      ASSERT_TRUE(more.ok());
      if (!*more) break;
      EXPECT_EQ(s.key, want[i].key);
      EXPECT_EQ(s.path, want[i].path);
      EXPECT_EQ(s.tar_member_index, want[i].tar_member_index);
      EXPECT_EQ(s.captions, want[i].captions);
      EXPECT_EQ(s.fields[0].type, want[i].fields[0].type);
      EXPECT_EQ(s.fields[0].f, want[i].fields[0].f);
      EXPECT_EQ(s.fields[0].s, want[i].fields[0].s);
    }
    EXPECT_EQ(i, want.size());
  }
  RawSample s;
  EXPECT_FALSE(DecodeSample("junk", &s).ok());
}

// A JSONL manifest whose lines of one image are far apart, whose stems collide ("a/x.jpg" and
// "a/x.png" are keyed by their full names) and whose keys still collide after that (below),
// ingested with 4 KiB sorts and with the default: the same samples, in the same order, as the
// rules say.
TEST(Ingest, ManifestGroupingAndKeysAreTheSameWhenEverySortSpills) {
  TempDir tmp;
  std::string m;
  const int n = 3000;
  for (int i = 0; i < n; ++i) {
    m += "{\"image\": \"img/" + std::to_string(i) + ".jpg\", \"text\": \"first " +
         std::to_string(i) + "\"}\n";
  }
  for (int i = n - 1; i >= 0; i -= 7) {  // second captions, far from the first, in reverse
    m += "{\"image\": \"img/" + std::to_string(i) + ".jpg\", \"text\": \"second " +
         std::to_string(i) + "\"}\n";
  }
  m += "{\"image\": \"a/x.jpg\", \"text\": \"x jpg\"}\n";
  m += "{\"image\": \"a/x.png\", \"text\": \"x png\"}\n";
  // "b.jpg" and "b.png" share the stem "b" and are keyed "b.jpg" and "b.png"; "b.jpg.gif" has
  // the stem "b.jpg", which only it has, so its key is "b.jpg" too: MakeKeysUnique makes it
  // "b.jpg#2".
  m += "{\"image\": \"b.jpg\", \"text\": \"b\"}\n";
  m += "{\"image\": \"b.png\", \"text\": \"b\"}\n";
  m += "{\"image\": \"b.jpg.gif\", \"text\": \"b\"}\n";
  WriteBytes(tmp / "m.jsonl", m);
  auto base = Ingest((tmp / "m.jsonl").string(), InputFormat::kJsonl);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  ::setenv("MM_SORT_MEMORY", "4096", 1);
  auto spilled = Ingest((tmp / "m.jsonl").string(), InputFormat::kJsonl);
  ::unsetenv("MM_SORT_MEMORY");
  ASSERT_TRUE(spilled.ok()) << spilled.status().ToString();
  ASSERT_EQ(base->samples.size(), static_cast<size_t>(n + 5));
  ASSERT_EQ(spilled->samples.size(), base->samples.size());
  for (size_t i = 0; i < base->samples.size(); ++i) {
    EXPECT_EQ(spilled->samples[i].key, base->samples[i].key);
    EXPECT_EQ(spilled->samples[i].source, base->samples[i].source);
    EXPECT_EQ(spilled->samples[i].captions, base->samples[i].captions);
  }
  // The rules themselves.
  const auto& s = base->samples;
  EXPECT_EQ(s[0].key, "img/0");
  EXPECT_EQ(s[0].captions, std::vector<std::string>{"first 0"});
  EXPECT_EQ(s[3].captions, (std::vector<std::string>{"first 3", "second 3"}));  // 2999 - 7 * 428
  EXPECT_EQ(s[n - 1].captions, (std::vector<std::string>{"first 2999", "second 2999"}));
  EXPECT_EQ(s[4].captions, std::vector<std::string>{"first 4"});
  EXPECT_EQ(s[n].key, "a/x.jpg");
  EXPECT_EQ(s[n + 1].key, "a/x.png");
  EXPECT_EQ(s[n + 2].key, "b.jpg");
  EXPECT_EQ(s[n + 3].key, "b.png");
  EXPECT_EQ(s[n + 4].key, "b.jpg#2");
}

// Ingest of `input` with the default sort memory and with 4 KiB: the same samples and issues.
void ExpectSameWhenSpilled(const std::string& input, size_t want_samples) {
  auto base = Ingest(input, InputFormat::kAuto);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  ::setenv("MM_SORT_MEMORY", "4096", 1);
  auto spilled = Ingest(input, InputFormat::kAuto);
  ::unsetenv("MM_SORT_MEMORY");
  ASSERT_TRUE(spilled.ok()) << spilled.status().ToString();
  ASSERT_EQ(base->samples.size(), want_samples);
  ASSERT_EQ(spilled->samples.size(), want_samples);
  for (size_t i = 0; i < want_samples; ++i) {
    EXPECT_EQ(spilled->samples[i].key, base->samples[i].key);
    EXPECT_EQ(spilled->samples[i].source, base->samples[i].source);
    EXPECT_EQ(spilled->samples[i].tar_member_index, base->samples[i].tar_member_index);
    EXPECT_EQ(spilled->samples[i].captions, base->samples[i].captions);
  }
  ASSERT_EQ(spilled->issues.size(), base->issues.size());
  for (size_t i = 0; i < base->issues.size(); ++i) {
    EXPECT_EQ(spilled->issues[i].source, base->issues[i].source);
    EXPECT_EQ(spilled->issues[i].reason, base->issues[i].reason);
  }
}

// A folder of pairs in nested folders, listed and paired through sorts: 1,500 pairs in 3
// folders of one level and one of two, names that sort around their extensions ("a.jpg",
// "a.txt", "a0.jpg", "a-b.png"), two images of one key, a caption without an image.
TEST(Ingest, FolderPairsAreTheSameWhenEverySortSpills) {
  TempDir tmp;
  for (int i = 0; i < 1500; ++i) {
    const std::string dir = i % 4 == 3 ? "d3/deeper/" : "d" + std::to_string(i % 4) + "/";
    const std::string stem = dir + (i % 2 ? "a" : "a-") + std::to_string(i);
    WriteBytes(tmp / (stem + (i % 3 ? ".jpg" : ".png")), "x");
    WriteBytes(tmp / (stem + ".txt"), "caption " + std::to_string(i));
  }
  WriteBytes(tmp / "d0/a.jpg", "x");
  WriteBytes(tmp / "d0/a.png", "x");  // same key as a.jpg: duplicate_key
  WriteBytes(tmp / "d0/a.txt", "a");
  WriteBytes(tmp / "d1/lonely.txt", "no image");  // missing_file
  ExpectSameWhenSpilled(tmp.path().string(), 1501);
}

// WebDataset tars in a folder whose keys repeat across tars: prefixed by the tar's name
// through a sort (RekeyRepeated), as in memory.
TEST(Ingest, TarKeysRepeatedAcrossTarsAreTheSameWhenEverySortSpills) {
  TempDir tmp;
  int rc = 0;
  RunPython(R"(
import io, tarfile
for t in range(3):
    with tarfile.open()" +
                Py(tmp.path()) + R"( + '/part-%d.tar' % t, 'w') as tar:
        for i in range(400):
            key = '%06d' % (i if i % 5 else 100000 * t + i)  # every fifth key is the tar's own
            for ext, data in (('jpg', b'x'), ('txt', ('caption %d %d' % (t, i)).encode())):
                info = tarfile.TarInfo('%s.%s' % (key, ext))
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
)",
            &rc);
  ASSERT_EQ(rc, 0);
  ExpectSameWhenSpilled(tmp.path().string(), 1200);
  auto r = Ingest(tmp.path().string(), InputFormat::kAuto);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->samples[1].key, "part-0/000001");  // in all three tars
  EXPECT_EQ(r->samples[0].key, "000000");         // 100000 * t + 0: only in part-0
}

// A COCO file read through the SAX reader and its sorts: annotations before images, a repeated
// id, two ids of one file, annotations of unknown and of unstorable images, entries without
// their fields, an image without annotation, file names that share a stem.
TEST(Ingest, CocoIsTheSameWhenEverySortSpills) {
  TempDir tmp;
  std::string annotations, images;
  for (int i = 0; i < 1200; ++i) {
    annotations += (i ? "," : "") + std::string("{\"image_id\": ") + std::to_string(i % 700) +
                   ", \"caption\": \"caption " + std::to_string(i) + "\"}";
  }
  annotations += ", {\"image_id\": 99999, \"caption\": \"nobody's\"}, {\"caption\": \"no id\"}";
  annotations += ", {\"image_id\": \"bad\", \"caption\": \"of the bad name\"}";
  annotations += ", {\"image_id\": 800, \"caption\": \"q\"}";
  for (int i = 0; i < 720; ++i) {
    const std::string name =
        i % 50 == 7 ? "shared.jpg" : "p" + std::to_string(i % 600) + (i % 3 ? ".jpg" : ".png");
    images += (i ? "," : "") + std::string("{\"id\": ") + std::to_string(i) +
              ", \"file_name\": \"" + name + "\"}";
  }
  images += ", {\"id\": 5, \"file_name\": \"again.jpg\"}, {\"file_name\": \"no id.jpg\"}";
  images += ", {\"id\": \"bad\", \"file_name\": \"caf\xff.jpg\"}";
  images += ", {\"id\": 800, \"file_name\": \"q.jpg\"}, {\"id\": 801, \"file_name\": \"q.png\"}";
  WriteBytes(tmp / "captions.json", "{\"info\": {\"images\": [1, 2]}, \"annotations\": [" +
                                        annotations + "], \"licenses\": [], \"images\": [" +
                                        images + "]}");
  // Samples: p<k> for the 588 k in 0..599 with k % 50 != 7 (ids k and k + 600 share a file),
  // shared.jpg (ids 7, 57, ... 707), q.jpg.
  ExpectSameWhenSpilled((tmp / "captions.json").string(), 590);
  auto r = Ingest((tmp / "captions.json").string(), InputFormat::kCoco);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::map<std::string, int> reasons;
  for (const IngestIssue& i : r->issues) ++reasons[i.reason];
  EXPECT_EQ(reasons["duplicate_key"], 1);          // id 5 again
  EXPECT_EQ(reasons["invalid_utf8"], 1);           // caf\xff.jpg: its annotation is not reported
  EXPECT_EQ(reasons["invalid_manifest_line"], 3);  // no id, no image_id, unknown 99999
  EXPECT_EQ(reasons["missing_caption"], 1);        // q.png
  // The stem rule counts q.png before it is dropped: q.jpg is keyed by its full name.
  EXPECT_EQ(r->samples.back().key, "q.jpg");
  EXPECT_EQ(r->samples[0].source, "p0.png");
  // Ids 0 and 600 are one file: their captions in annotation order (annotations 0, 600, 700).
  EXPECT_EQ(r->samples[0].captions,
            (std::vector<std::string>{"caption 0", "caption 600", "caption 700"}));
}

// A CSV image cell holding NUL bytes (which cannot be stored: dropped, as before) does not
// split the lines of another image whose name is its prefix.
TEST(Ingest, CsvCellsWithNulBytesDoNotSplitAnotherImagesLines) {
  using namespace std::string_literals;
  TempDir tmp;
  WriteBytes(tmp / "m.csv", "image,text\na.png,first\n"s +
                                "a.png\0\0\0\0\0\0\0\x05\0\0\0\0\0\0\0\x01"s +
                                ",mid\na.png,second\n"s);
  for (const char* memory : {"", "4096"}) {
    if (*memory) ::setenv("MM_SORT_MEMORY", memory, 1);
    auto r = Ingest((tmp / "m.csv").string(), InputFormat::kCsv);
    ::unsetenv("MM_SORT_MEMORY");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->samples.size(), 1u);
    // The NUL path's stem is "a" too, counted before it is dropped: keyed by the full name.
    EXPECT_EQ(r->samples[0].key, "a.png");
    EXPECT_EQ(r->samples[0].captions, (std::vector<std::string>{"first", "second"}));
    ASSERT_EQ(r->issues.size(), 1u);
    EXPECT_EQ(r->issues[0].reason, "invalid_manifest_line");  // the path holds a NUL
  }
}

// A COCO file with two top-level "images" (or "annotations") members is refused in one line: a
// stream cannot know which one a DOM reader would keep (the last).
TEST(Ingest, CocoWithARepeatedTopLevelArrayIsRefused) {
  TempDir tmp;
  WriteBytes(tmp / "c.json",
             "{\"images\": [{\"id\": 1, \"file_name\": \"a.png\"}], \"images\": 5, "
             "\"annotations\": []}");
  auto r = Ingest((tmp / "c.json").string(), InputFormat::kCoco);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'images' appears twice"), std::string::npos)
      << r.status().ToString();
}

TEST(Ingest, CaptionsOverTheLimitAreCutToOneByteOver) {
  std::vector<std::string> c = {"abcdef", "ab", ""};
  CapCaptions(&c, 2);
  EXPECT_EQ(c, (std::vector<std::string>{"abc", "ab", ""}));
  CapCaptions(&c, INT64_MAX);  // no overflow of max + 1
  EXPECT_EQ(c, (std::vector<std::string>{"abc", "ab", ""}));
  CapCaptions(&c, -1);
  EXPECT_EQ(c[0], "abc");
}

}  // namespace
}  // namespace mm::pack
