// libFuzzer target: a whole shard file as the fuzzer mutates it, opened and read through
// ShardSet (HDF5 chunk query, bounds checks, table checks, zstd). The input becomes
// shard-000000.h5 of a one-shard set whose index.json agrees with the file's size, so every
// mutation reaches HDF5 and the reader's checks. Seed the corpus with real shards, e.g.
//   mmpack build DATA -o seed --image-size 16 --samples-per-shard 4; cp seed/shard-*.h5 CORPUS/
// and set MM_FUZZ_INDEX to that set's index.json (its counts are kept; only bytes/xxh3 change).
// Checks: no crash, no sanitizer report; every read returns OK or Corruption.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "mm/reader.h"

namespace {

std::string Dir() {
  static std::string dir = [] {
    char tmpl[] = "/tmp/mm_fuzz_shard_XXXXXX";
    return std::string(mkdtemp(tmpl));
  }();
  return dir;
}

nlohmann::json BaseIndex() {
  const char* path = std::getenv("MM_FUZZ_INDEX");
  if (!path) {
    std::fprintf(stderr, "set MM_FUZZ_INDEX to the seed set's index.json\n");
    std::abort();
  }
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static nlohmann::json base = BaseIndex();
  const std::string dir = Dir();
  {
    std::ofstream out(dir + "/shard-000000.h5", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  nlohmann::json index = base;
  nlohmann::json shard = index["shards"][0];
  shard["file"] = "shard-000000.h5";
  shard["bytes"] = size;
  index["shards"] = nlohmann::json::array({shard});
  index["totals"] = {{"shards", 1},
                     {"samples", shard["samples"]},
                     {"captions", shard["captions"]},
                     {"tokens", shard["tokens"]},
                     {"bytes", size}};
  {
    std::ofstream out(dir + "/index.json", std::ios::trunc);
    out << index.dump();
  }
  mm::reader::OpenOptions options;
  options.isolate_hdf5 = false;  // in-process, so the sanitizers see our own checks
  auto set = mm::reader::ShardSet::Open(dir, options);
  if (!set.ok()) return 0;
  const auto& s = *set.value();
  std::vector<uint8_t> buf(s.image_bytes());
  for (int64_t i = 0; i < s.num_samples(); ++i) {
    mm::Status st = s.ReadImage(i, buf.data());
    if (!st.ok() && !st.IsCorruption()) std::abort();
    (void)s.Key(i);
    for (int c = 0; c < s.NumCaptions(i); ++c) {
      auto t = s.Tokens(i, c);
      int64_t sum = 0;
      for (int32_t v : t) sum += v;
      volatile int64_t sink = sum;  // every token id read
      (void)sink;
    }
  }
  return 0;
}
