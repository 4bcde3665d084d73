// Tests of build/sample_source.h: a build given its samples by a SampleSource (the C++ API under
// mmpack.Writer) makes the same shards as the build that reads them from RAW, and the options a
// given-samples build cannot honour are refused before anything is made.
#include "build/sample_source.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "build/build.h"
#include "pack_test_util.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

// A program's samples: here those of a manifest, handed over as a source would.
class ManifestSource : public SampleSource {
 public:
  explicit ManifestSource(std::string manifest) : manifest_(std::move(manifest)) {}
  Result<IngestResult> Ingest(const FieldNames& fields, const fs::path& spill_dir) override {
    ++calls;
    MM_ASSIGN_OR_RETURN(IngestResult r,
                        IngestToList(manifest_, InputFormat::kJsonl, fields, spill_dir));
    r.format = InputFormat::kFeed;
    return r;
  }
  int calls = 0;

 private:
  std::string manifest_;
};

BuildOptions Fed(const fs::path& out) {
  BuildOptions o;
  o.input = "-";
  o.input_format = InputFormat::kFeed;
  o.output = out.string();
  o.tokenizer = AlbertModel();
  o.threads = 2;
  o.quiet = true;
  o.image_width = o.image_height = 48;
  o.samples_per_shard = 4;
  return o;
}

TEST(SampleSource, GivenSamplesMakeTheShardsOfTheBuildThatReadsThem) {
  TempDir tmp;
  const std::string manifest = (DataDir() / "skimage-micro" / "captions.jsonl").string();
  BuildOptions read = Fed(tmp / "read");
  read.input = manifest;
  read.input_format = InputFormat::kAuto;
  ASSERT_TRUE(Build::Run(read).ok());
  ManifestSource source(manifest);
  Status given = Build::Run(Fed(tmp / "given"), &source);
  ASSERT_TRUE(given.ok()) << given.ToString();
  EXPECT_EQ(source.calls, 1);
  int shards = 0;
  for (const auto& e : fs::directory_iterator(tmp / "read")) {
    const std::string name = e.path().filename().string();
    if (name == "index.json" || name == "report.json") continue;
    shards += name.rfind("shard-", 0) == 0;
    EXPECT_EQ(ReadBytes(e.path()), ReadBytes(tmp / "given" / name)) << name;
  }
  EXPECT_GE(shards, 2);
  EXPECT_NE(ReadBytes(tmp / "given" / "index.json").find("\"input_format\": \"feed\""),
            std::string::npos);
}

TEST(SampleSource, RefusesWhatGivenSamplesCannotDo) {
  TempDir tmp;
  ManifestSource source((DataDir() / "skimage-micro" / "captions.jsonl").string());
  BuildOptions resume = Fed(tmp / "a");
  resume.resume = true;
  Status st = Build::Run(resume, &source);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("once"), std::string::npos) << st.message();
  BuildOptions part = Fed(tmp / "b");
  part.part = "0/2";
  EXPECT_EQ(Build::Run(part, &source).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Build::Run(Fed(tmp / "c")).code(), StatusCode::kInvalidArgument);  // no source
  BuildOptions not_feed = Fed(tmp / "d");
  not_feed.input_format = InputFormat::kJsonl;
  EXPECT_EQ(Build::Run(not_feed, &source).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(source.calls, 0);
  EXPECT_TRUE(fs::is_empty(tmp.path()));
}

}  // namespace
}  // namespace mm::pack
