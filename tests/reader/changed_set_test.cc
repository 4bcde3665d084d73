// A set changed under its reader (reader/src/shard/mapping_guard.h, shard.h): a shard truncated or
// zeroed while mapped is reported as Corruption naming it. Before, truncation killed the
// process with SIGBUS and zeroed tables with SIGFPE (a division by a caption count read from
// the mapping), so each test here failed by killing the test binary.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "mm/reader.h"
#include "shard_fixture.h"

namespace mm::reader {
namespace {

using mm::testing::CocoSet;
using mm::testing::FixtureOptions;
using mm::testing::TempDir;

// A copy of coco (51 samples, 3 shards of 20, 20, 11) that the test may damage.
std::string CopyOfCoco(const TempDir& tmp) {
  FixtureOptions o;
  o.samples_per_shard = 20;
  const std::string dir = tmp / "set";
  testing::CopySet(CocoSet(o), dir);
  return dir;
}

// Reads batches in file order until one fails; its status (OK when none did).
Status FirstFailure(Loader& loader) {
  for (;;) {
    Result<BatchPtr> batch = loader.Next();
    if (!batch.ok()) return batch.status();
    if (!*batch) return Status::OK();
  }
}

void ExpectChangedShard(const Status& st, const std::string& shard) {
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find(shard), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("changed while it was read"), std::string::npos) << st.ToString();
}

TEST(ChangedSet, AShardTruncatedUnderALoaderIsAnErrorNamingItNotSigbus) {
  TempDir tmp("mm_changed");
  const std::string dir = CopyOfCoco(tmp);
  auto set = ShardSet::Open(dir);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = false;  // shard 0's batches first, then shard 1's
  o.prefetch_batches = 1;
  auto loader = Loader::Create(*set, o);
  ASSERT_TRUE(loader.ok());
  ASSERT_TRUE((*loader)->Next().ok());
  // As `cp other shard-000001.h5` begins (it truncates), or a disk that lost the file's end.
  ASSERT_EQ(::truncate((dir + "/shard-000001.h5").c_str(), 4096), 0);
  ExpectChangedShard(FirstFailure(**loader), "shard-000001.h5");
  // Direct reads of its samples too; every call returns.
  std::vector<uint8_t> image((*set)->image_bytes());
  ExpectChangedShard((*set)->ReadImage(25, image.data()), "shard-000001.h5");
  (void)(*set)->Tokens(25, 0);
  (void)(*set)->Key(25);
  ExpectChangedShard((*set)->CheckIntact(25), "shard-000001.h5");
  EXPECT_TRUE((*set)->CheckIntact(3).ok());  // shard 0 is untouched
  EXPECT_TRUE((*set)->ReadImage(3, image.data()).ok());
}

TEST(ChangedSet, AShardZeroedUnderALoaderNeverDividesByZero) {
  for (CaptionMode mode : {CaptionMode::kRandomCaption, CaptionMode::kAllCaptions}) {
    TempDir tmp("mm_changed");
    const std::string dir = CopyOfCoco(tmp);
    auto set = ShardSet::Open(dir);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    LoaderOptions o;
    o.batch_size = 4;
    o.caption_mode = mode;
    o.seed = 3;
    auto loader = Loader::Create(*set, o);
    ASSERT_TRUE(loader.ok());
    // Shard 2 becomes zeros in place, same size (the mapping sees it at once): caption counts
    // of 0, offsets of 0, zstd frames of zeros.
    const std::string victim = dir + "/shard-000002.h5";
    const int fd = ::open(victim.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const off_t size = ::lseek(fd, 0, SEEK_END);
    const std::vector<char> zeros(static_cast<size_t>(size), 0);
    ASSERT_EQ(::pwrite(fd, zeros.data(), zeros.size(), 0), static_cast<ssize_t>(zeros.size()));
    ::close(fd);
    ExpectChangedShard(FirstFailure(**loader), "shard-000002.h5");
    // The public order of an item of that shard is computed without a division by zero.
    for (int64_t pos = 0; pos < (*loader)->items_per_epoch(); ++pos) {
      const Item item = GlobalItem(**set, o, 0, pos);
      EXPECT_GE(item.caption, 0);
    }
  }
}

}  // namespace
}  // namespace mm::reader
