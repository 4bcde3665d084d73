// The cache of remote shards (reader/src/remote/cache.h) against a real HTTP server on
// 127.0.0.1: the byte limit, LRU eviction that spares pinned shards, waiting for room, stale
// temporary files, two processes sharing one directory, and a Loader reading a remote set
// through a cache smaller than the set.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "mm/internal/checksum.h"
#include "mm/reader.h"
#include "remote_util.h"

namespace mm::reader {
namespace {

using mm::testing::CocoSet;
using mm::testing::CountLogLines;
using mm::testing::ScopedEnv;
using mm::testing::StartHttpServer;
using mm::testing::TempDir;

// A local coco set in 12-sample shards served over HTTP, and the shards' sizes.
struct Served {
  TempDir tmp{"mm_cache"};
  std::string local = CocoSet(testing::SmallShards());
  std::unique_ptr<testing::ServerProcess> http;
  std::vector<int64_t> bytes;  // per shard
  std::string url() const { return http->url() + "/coco"; }
  std::string log() const { return tmp / "requests.log"; }
  explicit Served(std::vector<std::string> extra = {}) {
    testing::Mirror(local, tmp / "www/coco");
    extra.insert(extra.end(), {"--log", log()});
    auto started = StartHttpServer(tmp / "www", extra);
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    if (started.ok()) http = std::move(started).value();
    auto set = ShardSet::Open(local);
    for (const ShardEntry& e : (*set)->info().shards) bytes.push_back(e.bytes);
  }
};

std::set<std::string> CachedShardNames(const std::string& cache) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::recursive_directory_iterator(cache)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".h5") names.insert(name.substr(17));  // after "<xxh3>."
  }
  return names;
}

TEST(RemoteCache, NeverHoldsMoreThanItsLimitNorEvictsAPinnedShard) {
  Served s;
  ASSERT_TRUE(s.http);
  const int64_t limit = s.bytes[0] + s.bytes[1] + std::max(s.bytes[2], s.bytes[3]);
  OpenOptions o = testing::CacheOptions(s.tmp / "cache", limit);
  o.remote.cache_wait_s = 1;
  auto set = ShardSet::Open(s.url(), o);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  auto p0 = (*set)->PinShard(0), p1 = (*set)->PinShard(1);
  ASSERT_TRUE(p0.ok() && p1.ok());
  { ASSERT_TRUE((*set)->PinShard(2).ok()); }  // pinned, then released: evictable
  auto p3 = (*set)->PinShard(3);              // room only by evicting shard 2
  ASSERT_TRUE(p3.ok()) << p3.status().ToString();
  EXPECT_EQ(CachedShardNames(s.tmp / "cache"),
            (std::set<std::string>{"shard-000000.h5", "shard-000001.h5", "shard-000003.h5"}));
  int64_t held = 0;
  testing::CachedFiles(s.tmp / "cache", &held);
  EXPECT_LE(held, limit);
  EXPECT_EQ((*set)->cache_stats().evictions, 1);

  // Shards 0, 1 and 3 pinned: no room for 2, and the pin says so after cache_wait_s.
  auto p2 = (*set)->PinShard(2);
  ASSERT_FALSE(p2.ok());
  EXPECT_EQ(p2.status().code(), StatusCode::kIOError);
  EXPECT_NE(p2.status().message().find("no room for " + s.url() + "/shard-000002.h5"),
            std::string::npos)
      << p2.status().ToString();
  EXPECT_NE(p2.status().message().find("pinned by readers"), std::string::npos);

  // Shard 3 released while another thread waits for room: the wait ends with the pin.
  OpenOptions patient = o;
  patient.remote.cache_wait_s = 30;
  auto set2 = ShardSet::Open(s.url(), patient);
  ASSERT_TRUE(set2.ok());
  Result<ShardPin> waited = Status::Internal("not run");
  std::thread waiter([&] { waited = (*set2)->PinShard(2); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  p3 = ShardPin();
  waiter.join();
  EXPECT_TRUE(waited.ok()) << waited.status().ToString();
  EXPECT_EQ(CachedShardNames(s.tmp / "cache"),
            (std::set<std::string>{"shard-000000.h5", "shard-000001.h5", "shard-000002.h5"}));
  EXPECT_LE((*set)->cache_stats().peak_bytes, limit);
  EXPECT_LE((*set2)->cache_stats().peak_bytes, limit);
}

// A pin held by another open file description (as another process holds it) is respected too:
// eviction takes an exclusive flock without waiting, and skips what it cannot lock.
TEST(RemoteCache, AShardLockedElsewhereIsNotEvicted) {
  Served s;
  ASSERT_TRUE(s.http);
  const int64_t limit = s.bytes[0] + std::max(s.bytes[1], s.bytes[2]);
  OpenOptions o = testing::CacheOptions(s.tmp / "cache", limit);
  o.remote.cache_wait_s = 1;
  auto set = ShardSet::Open(s.url(), o);
  ASSERT_TRUE(set.ok());
  { ASSERT_TRUE((*set)->PinShard(0).ok()); }
  std::string path;
  for (const auto& e : std::filesystem::recursive_directory_iterator(s.tmp / "cache")) {
    if (e.path().extension() == ".h5") path = e.path().string();
  }
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_SH), 0);  // "another reader" pins shard 0
  { ASSERT_TRUE((*set)->PinShard(1).ok()); }
  auto p2 = (*set)->PinShard(2);  // would need shard 0 or 1 gone: 1 goes, 0 stays
  EXPECT_TRUE(p2.ok()) << p2.status().ToString();
  EXPECT_TRUE(std::filesystem::exists(path));
  ::close(fd);
}

TEST(RemoteCache, TemporaryFilesOfDeadDownloadsAreRemoved) {
  Served s;
  ASSERT_TRUE(s.http);
  OpenOptions o = testing::CacheOptions(s.tmp / "cache", int64_t{1} << 30);
  auto set = ShardSet::Open(s.url(), o);
  ASSERT_TRUE(set.ok());
  { ASSERT_TRUE((*set)->PinShard(0).ok()); }  // makes the set's cache directory
  std::string set_dir;
  for (const auto& e : std::filesystem::directory_iterator(s.tmp / "cache/sets")) {
    set_dir = e.path().string();
  }
  const std::string dead = set_dir + "/0123456789abcdef.shard-000009.h5.part.999999.0";
  const std::string live = set_dir + "/0123456789abcdef.shard-000008.h5.part.999998.0";
  const std::string foreign = set_dir + "/notes.txt";  // not the cache's: never touched
  testing::WriteFile(dead, std::string(1000, 'x'));
  testing::WriteFile(live, std::string(1000, 'x'));
  testing::WriteFile(foreign, "mine");
  const int fd = ::open(live.c_str(), O_RDONLY);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);     // a download in progress holds its file
  ASSERT_TRUE((*set)->PinShard(1).ok());  // a reservation scans the directory
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_TRUE(std::filesystem::exists(foreign));
  ::close(fd);
}

// The cache set folder of the (only) set in `cache`.
std::string OnlySetFolder(const std::string& cache) {
  std::string set_dir;
  for (const auto& e : std::filesystem::directory_iterator(cache + "/sets")) {
    set_dir = e.path().string();
  }
  return set_dir;
}

void MakeOld(const std::string& path) {  // least recently used of all: evicted first
  const struct timespec times[2] = {{1, 0}, {1, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

// Eviction removed every file named <16 hex>.<anything> under CACHE/sets/<16 hex>/, whoever
// wrote it, and went through a symlinked set folder, deleting such files outside the cache.
TEST(RemoteCache, EvictsOnlyItsOwnFilesAndNeverThroughASymlink) {
  Served s;
  ASSERT_TRUE(s.http);
  const std::string cache = s.tmp / "cache";
  const int64_t largest = *std::max_element(s.bytes.begin(), s.bytes.end());
  OpenOptions o = testing::CacheOptions(cache, 2 * largest);  // every third pin evicts
  o.remote.cache_wait_s = 1;
  auto set = ShardSet::Open(s.url(), o);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  { ASSERT_TRUE((*set)->PinShard(0).ok()); }
  const std::string set_dir = OnlySetFolder(cache);
  const std::string shard0 = testing::ReadFile(s.local + "/shard-000000.h5");
  // A file of the user's with a cache-like name, in the set's own folder (not HDF5).
  const std::string foreign = set_dir + "/0123456789abcdef.notes.txt";
  testing::WriteFile(foreign, std::string(1000, 'x'));
  // A folder outside the cache, linked in as a set folder, with what the cache would write
  // there: a location file whose XXH3-64 is the folder's name and a real shard.
  const std::string outside = s.tmp / "outside", location = "s3://someone/else";
  std::filesystem::create_directories(outside);
  testing::WriteFile(outside + "/location", location);
  const std::string victim = outside + "/0123456789abcdef.shard-000000.h5";
  testing::WriteFile(victim, shard0);
  const std::string link = cache + "/sets/" + Xxh3Hex(location.data(), location.size());
  std::filesystem::create_directory_symlink(outside, link);
  for (const std::string& p : {foreign, victim}) MakeOld(p);
  for (size_t k = 1; k < s.bytes.size(); ++k) {
    auto pin = (*set)->PinShard(k);
    ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  }
  EXPECT_GE((*set)->cache_stats().evictions, 2);  // its own shards still go
  EXPECT_TRUE(std::filesystem::exists(foreign));
  EXPECT_EQ(testing::ReadFile(victim), shard0);
  // A set whose folder is a symlink is refused, never written through.
  std::filesystem::remove(link);
  const std::string own = Xxh3Hex(s.url().data(), s.url().size());
  std::filesystem::rename(set_dir, s.tmp / "moved");
  std::filesystem::create_directory_symlink(outside, cache + "/sets/" + own);
  auto refused = (*set)->PinShard(0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("symlink"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(outside),
                          std::filesystem::directory_iterator()),
            2);  // location and the shard: nothing written there
  EXPECT_EQ(testing::ReadFile(victim), shard0);
}

// One <xxh3>.<shard>.lock file stayed per shard ever cached, unbounded by the limit.
TEST(RemoteCache, DownloadLocksLiveOnlyWhileADownloadDoes) {
  Served s;
  ASSERT_TRUE(s.http);
  const std::string cache = s.tmp / "cache";
  auto set = ShardSet::Open(s.url(), testing::CacheOptions(cache, int64_t{1} << 30));
  ASSERT_TRUE(set.ok());
  auto locks = [&] {
    int n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(cache)) {
      n += e.path().extension() == ".lock" && e.path().parent_path() != cache ? 1 : 0;
    }
    return n;
  };
  { ASSERT_TRUE((*set)->PinShard(0).ok()); }
  EXPECT_EQ(locks(), 0);
  // A lock left by a process that died (no one holds it) goes at the next reservation; one
  // that a live download holds stays.
  const std::string set_dir = OnlySetFolder(cache);
  const std::string dead = set_dir + "/0123456789abcdef.shard-000009.h5.lock";
  const std::string held = set_dir + "/0123456789abcdef.shard-000008.h5.lock";
  testing::WriteFile(dead, "");
  testing::WriteFile(held, "");
  const int fd = ::open(held.c_str(), O_RDONLY);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  for (size_t k = 1; k < s.bytes.size(); ++k) ASSERT_TRUE((*set)->PinShard(k).ok());
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(held));
  ::close(fd);
  EXPECT_EQ(locks(), 1);  // the one held above, until a reservation finds it free
}

// Run only as a child of SharedByTwoProcessesDownloadsEachShardOnce: opens the set and pins
// every shard from two threads at once, reading one image of each.
TEST(RemoteCacheHelper, PinEveryShard) {
  const char* url = std::getenv("MM_CACHE_HELPER_URL");
  if (!url) GTEST_SKIP() << "a helper of RemoteCache.SharedByTwoProcessesDownloadsEachShardOnce";
  auto set = ShardSet::Open(url, testing::CacheOptions(std::getenv("MM_CACHE_HELPER_DIR")));
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  std::vector<uint8_t> image((*set)->image_bytes());
  auto pin_all = [&](bool backwards) {
    for (size_t i = 0; i < (*set)->num_shards(); ++i) {
      const size_t k = backwards ? (*set)->num_shards() - 1 - i : i;
      auto pin = (*set)->PinShard(k);
      ASSERT_TRUE(pin.ok()) << pin.status().ToString();
    }
  };
  std::thread other(pin_all, true);
  pin_all(false);
  other.join();
  for (int64_t i = 0; i < (*set)->num_samples(); ++i) {
    auto pin = (*set)->PinSample(i);
    ASSERT_TRUE(pin.ok());
    ASSERT_TRUE((*set)->ReadImage(i, image.data()).ok());
  }
}

TEST(RemoteCache, SharedByTwoProcessesDownloadsEachShardOnce) {
  Served s;
  ASSERT_TRUE(s.http);
  std::vector<pid_t> children;
  for (int c = 0; c < 2; ++c) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::setenv("MM_CACHE_HELPER_URL", s.url().c_str(), 1);
      ::setenv("MM_CACHE_HELPER_DIR", (s.tmp / "cache").c_str(), 1);
      ::execl("/proc/self/exe", "mm_reader_test", "--gtest_filter=RemoteCacheHelper.PinEveryShard",
              static_cast<char*>(nullptr));
      _exit(127);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "helper failed: " << status;
  }
  for (size_t k = 0; k < s.bytes.size(); ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "shard-%06zu.h5 200", k);
    EXPECT_EQ(CountLogLines(s.log(), name), 1) << name << " fetched more than once";
  }
}

// --- A Loader over a remote set through a bounded cache ---

TEST(RemoteLoader, BlockShuffleReadsEveryItemOnceWithinTheCacheLimit) {
  Served s;
  ASSERT_TRUE(s.http);
  const int64_t largest = *std::max_element(s.bytes.begin(), s.bytes.end());
  // Room for the window read and the next at W = 1, and the 3-sample last shard that a batch
  // of 5 may read between them.
  const int64_t limit = 2 * largest + s.bytes[4];
  auto remote = ShardSet::Open(s.url(), testing::CacheOptions(s.tmp / "cache", limit));
  ASSERT_TRUE(remote.ok());
  LoaderOptions o;
  o.shuffle_mode = ShuffleMode::kBlock;
  o.shuffle_window = 1;  // the local set has no cache limit to derive it from
  o.batch_size = 5;
  testing::ExpectSameBatches(*ShardSet::Open(s.local), *remote, /*epochs=*/3, o);
  const CacheStats stats = (*remote)->cache_stats();
  EXPECT_LE(stats.peak_bytes, limit);
  int64_t held = 0;
  testing::CachedFiles(s.tmp / "cache", &held);
  EXPECT_LE(held, limit);
  // Every download is one whole GET of a shard, none hidden.
  int64_t gets = 0;
  for (size_t k = 0; k < s.bytes.size(); ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "shard-%06zu.h5 200", k);
    gets += CountLogLines(s.log(), name);
  }
  EXPECT_EQ(stats.downloads, gets);
  // What the design guarantees, not an exact figure: which shards LRU eviction keeps for a
  // later window (the wrap-around of the padded last batch, the next epoch) depends on which
  // pins the decode threads still hold when a reservation evicts, i.e. on timing (measured
  // under load: 14 to 17 downloads). At least: every shard once in the cold first epoch, and
  // in each later epoch the shards not among the at most `limit` bytes cached at its start.
  // At most: each shard once per window visit (the prefetcher holds a shard through its
  // window): per epoch n windows and at most 2 more for the 4 padding items (only the 3-sample
  // shard is shorter than 4), plus the next epoch's windows fetched ahead (at most 3 fit).
  const int64_t n = static_cast<int64_t>(s.bytes.size());
  std::vector<int64_t> sorted = s.bytes;
  std::sort(sorted.begin(), sorted.end());
  int64_t missing = -limit, k_min = 0;
  for (int64_t b : sorted) missing += b;
  for (int64_t covered = 0; covered < missing; covered += sorted[k_min++]) {
  }
  EXPECT_GE(stats.downloads, n + 2 * k_min);
  EXPECT_LE(stats.downloads, 3 * (n + 2) + 3);
}

// Exact evaluation over a remote set through a bounded cache: with
// even_batches false the prefetcher plans no wrap-around; both ranks give the local set's batches,
// and over both ranks every sample once, in two epochs.
TEST(RemoteLoader, UnevenBatchesGiveEverySampleOnceWithinTheCacheLimit) {
  Served s;
  ASSERT_TRUE(s.http);
  const int64_t largest = *std::max_element(s.bytes.begin(), s.bytes.end());
  const int64_t limit = 2 * largest + s.bytes[4];
  auto remote = ShardSet::Open(s.url(), testing::CacheOptions(s.tmp / "cache", limit));
  ASSERT_TRUE(remote.ok());
  LoaderOptions o;
  o.shuffle_mode = ShuffleMode::kBlock;
  o.shuffle_window = 1;
  o.batch_size = 5;
  o.world_size = 2;
  o.even_batches = false;
  std::map<int64_t, int> count;
  for (int rank = 0; rank < 2; ++rank) {
    o.rank = rank;
    testing::ExpectSameBatches(*ShardSet::Open(s.local), *remote, /*epochs=*/2, o);
    LoaderOptions once = o;
    once.drop_last = false;
    auto loader = Loader::Create(*remote, once);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    for (;;) {
      auto b = (*loader)->Next();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      if (!*b) break;
      for (int64_t i : (*b)->indices) ++count[i];
    }
  }
  EXPECT_EQ(static_cast<int64_t>(count.size()), (*remote)->num_samples());
  for (const auto& [i, c] : count) EXPECT_EQ(c, 1) << "sample " << i;
  EXPECT_LE((*remote)->cache_stats().peak_bytes, limit);
}

TEST(RemoteLoader, AutoShuffleBecomesBlockWhenTheSetDoesNotFit) {
  Served s;
  ASSERT_TRUE(s.http);
  const int64_t largest = *std::max_element(s.bytes.begin(), s.bytes.end());
  auto remote = ShardSet::Open(s.url(), testing::CacheOptions(s.tmp / "cache", 5 * largest / 2));
  ASSERT_TRUE(remote.ok());
  LoaderOptions o;
  o.batch_size = 4;
  auto loader = Loader::Create(*remote, o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  EXPECT_EQ((*loader)->options().shuffle_mode, ShuffleMode::kBlock);
  EXPECT_EQ((*loader)->options().shuffle_window, 1);
  EXPECT_NE((*loader)->notice().find("block shuffle over windows of 1 shards"), std::string::npos)
      << (*loader)->notice();
  EXPECT_EQ((*loader)->state().order, "block");

  // Explicitly global: refused, naming the sizes. A window that does not fit: refused.
  o.shuffle_mode = ShuffleMode::kGlobal;
  auto global = Loader::Create(*remote, o);
  ASSERT_FALSE(global.ok());
  EXPECT_NE(global.status().message().find("global shuffle reads any shard at any time"),
            std::string::npos);
  o.shuffle_mode = ShuffleMode::kBlock;
  o.shuffle_window = 2;
  auto wide = Loader::Create(*remote, o);
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("at most 1 shards fit"), std::string::npos)
      << wide.status().ToString();

  // The whole set fits: auto stays global.
  auto roomy = ShardSet::Open(s.url(), testing::CacheOptions(s.tmp / "cache", int64_t{1} << 30));
  o = LoaderOptions();
  auto fits = Loader::Create(*roomy, o);
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ((*fits)->options().shuffle_mode, ShuffleMode::kGlobal);
  EXPECT_TRUE((*fits)->notice().empty());
}

TEST(RemoteLoader, LimitBelowTwoShardsIsAClearError) {
  Served s;
  ASSERT_TRUE(s.http);
  const int64_t largest = *std::max_element(s.bytes.begin(), s.bytes.end());
  auto remote = ShardSet::Open(s.url(), testing::CacheOptions(s.tmp / "cache", largest + 1));
  ASSERT_TRUE(remote.ok());
  auto loader = Loader::Create(*remote, LoaderOptions());
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(loader.status().message().find("cannot hold what one batch of 32 may read at once"),
            std::string::npos)
      << loader.status().ToString();
  EXPECT_NE(loader.status().message().find("raise the limit to at least"), std::string::npos);
}

// A shard that cannot be fetched fails the batch that needs it, naming the URL; the loader
// goes on to the next batch.
TEST(RemoteLoader, AShardThatCannotBeFetchedFailsItsBatchNamingTheUrl) {
  Served s({"--fail", "*/shard-000002.h5:404:always"});
  ASSERT_TRUE(s.http);
  auto remote = ShardSet::Open(s.url(), testing::CacheOptions(s.tmp / "cache"));
  ASSERT_TRUE(remote.ok());
  LoaderOptions o;
  o.shuffle = false;
  o.batch_size = 12;
  auto loader = Loader::Create(*remote, o);
  ASSERT_TRUE(loader.ok());
  int good = 0, failed = 0;
  for (int step = 0; step < 5; ++step) {
    auto b = (*loader)->Next();
    if (b.ok() && *b) ++good;
    if (!b.ok()) {
      ++failed;
      EXPECT_TRUE(b.status().IsNotFound()) << "step " << step << ": " << b.status().ToString();
      EXPECT_NE(b.status().message().find("/coco/shard-000002.h5"), std::string::npos);
    }
  }
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(good, 3);  // 51 samples: 4 batches of 12, the last 3 samples dropped
}

}  // namespace
}  // namespace mm::reader
