// Tests of ingest/feed.h: the stream mmpack.Writer sends becomes the sample list every other
// format makes (keys, sources, captions, typed fields, images as paths or spooled bytes), and
// a stream that is cut short or malformed anywhere is an error naming the record, never a set.
#include "ingest/feed.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ingest/sample_list.h"
#include "pack_test_util.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

// A feed written by hand, as reader/python/mmpack/_writer.py writes it.
class Feed {
 public:
  Feed() { out_.append(kFeedMagic, 8); }
  template <typename T>
  Feed& Num(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Feed& Str(const std::string& s) {
    Num<uint32_t>(static_cast<uint32_t>(s.size()));
    out_ += s;
    return *this;
  }
  // A sample with captions, one string field per `fields` entry ("" : missing), and an image
  // (`bytes`: given as bytes, else `image` is a path).
  Feed& Sample(const std::string& key, const std::string& source,
               const std::vector<std::string>& captions, const std::vector<std::string>& fields,
               const std::string& image, bool bytes) {
    out_ += 'S';
    Str(key).Str(source).Num<uint32_t>(static_cast<uint32_t>(captions.size()));
    for (const auto& c : captions) Str(c);
    Num<uint32_t>(static_cast<uint32_t>(fields.size()));
    for (const auto& f : fields) {
      if (f.empty()) {
        Num<uint8_t>(0);
      } else {
        Num<uint8_t>(3).Str(f);
      }
    }
    out_ += bytes ? 'B' : 'P';
    if (bytes) {
      Num<uint64_t>(image.size());
      out_ += image;
    } else {
      Str(image);
    }
    ++count_;
    return *this;
  }
  std::string End() const {
    std::string done = out_ + 'E';
    const uint64_t n = count_;
    done.append(reinterpret_cast<const char*>(&n), 8);
    return done;
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
  uint64_t count_ = 0;
};

Result<IngestResult> Read(const TempDir& dir, const std::string& stream, const FieldNames& fields) {
  const fs::path file = dir / "feed.bin";
  WriteBytes(file, stream);
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  fs::create_directories(dir / "images");
  auto r = IngestFeed(fd, fields, dir / "images", dir.path());
  ::close(fd);
  return r;
}

std::vector<RawSample> Samples(const IngestResult& r) {
  std::vector<RawSample> out;
  EXPECT_TRUE(ForEachSample(*r.list, [&](uint64_t, RawSample& s) {
                out.push_back(s);
                return Status::OK();
              }).ok());
  return out;
}

TEST(IngestFeed, SamplesComeInOrderWithPathsSpooledBytesAndFields) {
  TempDir dir;
  FieldNames fields;
  fields.extra = {"url"};
  Feed feed;
  feed.Sample("", "photos/a.jpg", {"one", "two"}, {"http://a"}, "/data/photos/a.jpg", false)
      .Sample("b", "b-bytes", {"three"}, {""}, std::string("\xFF\xD8\0bytes", 8), true)
      .Sample("b", "again", {"four"}, {"u"}, "/x.png", false);
  auto r = Read(dir, feed.End(), fields);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, InputFormat::kFeed);
  const auto s = Samples(*r);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].key, "photos/a");  // the manifests' rule: the source without its extension
  EXPECT_EQ(s[0].source, "photos/a.jpg");
  EXPECT_EQ(s[0].path, "/data/photos/a.jpg");
  EXPECT_EQ(s[0].captions, (std::vector<std::string>{"one", "two"}));
  ASSERT_EQ(s[0].fields.size(), 1u);
  EXPECT_EQ(s[0].fields[0].type, FieldValue::Type::kString);
  EXPECT_EQ(s[0].fields[0].s, "http://a");
  EXPECT_EQ(s[1].fields[0].type, FieldValue::Type::kMissing);
  EXPECT_EQ(ReadBytes(s[1].path), std::string("\xFF\xD8\0bytes", 8));
  EXPECT_EQ(fs::path(s[1].path).parent_path(), dir / "images");
  EXPECT_EQ(s[1].key, "b");
  EXPECT_EQ(s[2].key, "b#2");  // MakeKeysUnique, as every format
}

TEST(IngestFeed, EveryCutOfTheStreamIsCorruptionNamingTheEnd) {
  TempDir dir;
  Feed feed;
  feed.Sample("k", "s.jpg", {"c"}, {}, "/p.jpg", false).Sample("", "t", {"d"}, {}, "xy", true);
  const std::string whole = feed.End();
  for (size_t cut = 0; cut < whole.size(); ++cut) {
    fs::remove_all(dir / "images");
    auto r = Read(dir, whole.substr(0, cut), {});
    ASSERT_FALSE(r.ok()) << cut;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << cut;
  }
  fs::remove_all(dir / "images");
  auto last = Read(dir, whole.substr(0, whole.size() - 9), {});  // all but the end record
  ASSERT_FALSE(last.ok());
  EXPECT_NE(last.status().message().find("before its end record"), std::string::npos)
      << last.status().message();
  fs::remove_all(dir / "images");
  EXPECT_TRUE(Read(dir, whole, {}).ok());
}

TEST(IngestFeed, MalformedStreamsAreRefused) {
  TempDir dir;
  Feed a;
  a.Sample("k", "s", {"c"}, {"one"}, "/p", false);  // a field the build does not keep
  auto r = Read(dir, a.End(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("record 0: 1 fields"), std::string::npos)
      << r.status().message();
  Feed b;
  b.Sample("k", "s", {"c"}, {}, "/p", false);
  std::string count_wrong = b.bytes() + 'E';
  const uint64_t two = 2;
  count_wrong.append(reinterpret_cast<const char*>(&two), 8);
  fs::remove_all(dir / "images");
  EXPECT_FALSE(Read(dir, count_wrong, {}).ok());
  fs::remove_all(dir / "images");
  EXPECT_FALSE(Read(dir, b.End() + "x", {}).ok());  // bytes after the end
  fs::remove_all(dir / "images");
  EXPECT_FALSE(Read(dir, "MMFEED2\nE", {}).ok());
  Feed c;
  c.bytes() += 'S';
  c.Str("k").Str("");  // no source
  fs::remove_all(dir / "images");
  auto none = Read(dir, c.bytes(), {});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no source"), std::string::npos);
}

}  // namespace
}  // namespace mm::pack
