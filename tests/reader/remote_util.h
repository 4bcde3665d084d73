// remote_util.h: helpers of the remote-set tests: small multi-shard sets, uploading a set with
// the reader's own HTTP client, cache options, and comparing a remote set's batches with the
// local set's.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "../remote/test_servers.h"
#include "mm/reader.h"
#include "remote/http.h"
#include "remote/location.h"
#include "shard_fixture.h"

/// Skips the test when node (which runs s3rver) is absent from this machine.
#define MM_SKIP_WITHOUT_NODE()                                                     \
  do {                                                                             \
    if (mm::testing::NodeBinary().empty()) {                                       \
      GTEST_SKIP() << "node is not installed: the S3 tests need it to run s3rver " \
                      "(tools/install-deps.sh installs nodejs)";                   \
    }                                                                              \
  } while (false)

namespace mm::testing {

/// coco-cc in shards of 12 samples: 5 shards (the last of 3 samples).
inline FixtureOptions SmallShards() {
  FixtureOptions o;
  o.samples_per_shard = 12;
  return o;
}

/// Copies the set directory `from` to `to`, creating `to`'s parents.
inline void Mirror(const std::string& from, const std::string& to) {
  std::filesystem::create_directories(std::filesystem::path(to).parent_path());
  CopySet(from, to);
}

/// PUTs every file of the local set `dir` to the set location `url` (shards first, index.json
/// last), leaving out the files named in `skip`.
inline Status Upload(const std::string& dir, const std::string& url,
                     const std::set<std::string>& skip = {}) {
  MM_ASSIGN_OR_RETURN(auto loc, reader::internal::ParseLocation(
                                    url, reader::internal::S3Settings::FromEnvironment()));
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!skip.count(name) && name != "index.json") names.push_back(name);
  }
  names.push_back("index.json");
  reader::RemoteOptions options;
  for (const std::string& name : names) {
    reader::internal::HttpRequest request;
    MM_ASSIGN_OR_RETURN(request.url, loc.FileUrl(name));
    request.s3 = loc.kind == reader::internal::LocationKind::kS3 ? &loc.s3 : nullptr;
    MM_RETURN_NOT_OK(
        reader::internal::ThreadHttpClient().PutFile(request, options, dir + "/" + name));
  }
  return Status::OK();
}

/// OpenOptions with the cache in `dir` and quick retries (tests wait milliseconds, not seconds).
inline reader::OpenOptions CacheOptions(const std::string& dir, int64_t limit = 0) {
  reader::OpenOptions o;
  o.remote.cache_dir = dir;
  o.remote.cache_limit = limit;
  o.remote.initial_backoff_ms = 20;
  o.remote.max_backoff_ms = 200;
  o.remote.cache_wait_s = 30;
  return o;
}

/// Bytes of the shard files of the local set `dir` (what a whole download fetches).
inline int64_t SetBytes(const std::string& dir) {
  int64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".h5") total += static_cast<int64_t>(e.file_size());
  }
  return total;
}

/// Shard and temporary files in the cache directory `dir` (lock and location files aside).
inline int CachedFiles(const std::string& dir, int64_t* bytes = nullptr) {
  int n = 0;
  if (bytes) *bytes = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!it->is_regular_file() || name == "location" || name == ".lock" ||
        it->path().extension() == ".lock") {
      continue;
    }
    ++n;
    if (bytes) *bytes += static_cast<int64_t>(it->file_size());
  }
  return n;
}

/// Runs a loader over `a` and one over `b` with the same options for `epochs` epochs and
/// expects the same batches: indices, captions, keys, pixels, tokens.
inline void ExpectSameBatches(const std::shared_ptr<reader::ShardSet>& a,
                              const std::shared_ptr<reader::ShardSet>& b, int epochs,
                              reader::LoaderOptions o = {}) {
  ASSERT_TRUE(a && b);
  if (o.batch_size == 32) o.batch_size = 8;
  o.seed = 7;
  o.drop_last = false;
  auto la = reader::Loader::Create(a, o);
  auto lb = reader::Loader::Create(b, o);
  ASSERT_TRUE(la.ok()) << la.status().ToString();
  ASSERT_TRUE(lb.ok()) << lb.status().ToString();
  for (int epoch = 0; epoch < epochs; ++epoch) {
    (*la)->StartEpoch(epoch);
    (*lb)->StartEpoch(epoch);
    for (int64_t step = 0;; ++step) {
      auto x = (*la)->Next();
      auto y = (*lb)->Next();
      ASSERT_TRUE(x.ok()) << x.status().ToString();
      ASSERT_TRUE(y.ok()) << y.status().ToString();
      ASSERT_EQ(*x == nullptr, *y == nullptr) << "epoch " << epoch << " step " << step;
      if (!*x) break;
      const reader::Batch &p = **x, &q = **y;
      ASSERT_EQ(p.indices, q.indices) << "epoch " << epoch << " step " << step;
      ASSERT_EQ(p.caption, q.caption);
      ASSERT_EQ(p.keys, q.keys);
      ASSERT_EQ(p.tokens, q.tokens);
      ASSERT_TRUE(p.images == q.images) << "pixels differ, epoch " << epoch << " step " << step;
    }
  }
}

}  // namespace mm::testing
