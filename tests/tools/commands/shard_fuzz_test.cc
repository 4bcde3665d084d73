// Mutants of real shards through `mmpack verify`, `show` and `bench`: none may
// hang or crash. The seed set is built by RunBuild from the real coco-cc photos and captions
// (24 px, 8 samples a shard, the manifest's "license" kept as metadata/license, so show and
// verify also read the kept-field group). Each mutant changes one shard: random bit flips, random bytes, a
// zeroed range, or bit flips aimed at HDF5's metadata (the global heap "GCOL" that holds the
// variable-length strings, B-tree "TREE", local heap "HEAP", symbol table "SNOD"); three in four
// are re-sealed in index.json (size and XXH3) so that they reach libhdf5, the rest must be
// refused by their checksum. Each command is the real `mmpack` binary, in its own process group
// with a 120 s alarm: one killed by the alarm is a hang, one killed by any other signal a crash
// (exit status 1 with a message is the expected refusal); the mutant is then saved. A second seed
// set stores JPEGs at their own aspect ratio (format 2). The suite runs
// MM_FUZZ_MUTANTS (default 100) mutants from MM_FUZZ_SEED (default 1); the long run is the same
// test by hand:
//   MM_FUZZ_MUTANTS=10000 MM_FUZZ_KEEP=/tmp/fuzz bin/mm_pack_test --gtest_filter='ShardFuzz.*'
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "commands/commands.h"
#include "mm/internal/checksum.h"
#include "pack_test_util.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : fallback;
}

// One mutation of `bytes` (see the header comment).
void Mutate(std::mt19937_64* rng, std::string* bytes) {
  auto pick = [&](size_t n) { return static_cast<size_t>((*rng)() % n); };
  const size_t size = bytes->size();
  switch (pick(4)) {
    case 0:  // bit flips anywhere
      for (size_t k = 0, n = 1 + pick(4); k < n; ++k) (*bytes)[pick(size)] ^= 1 << pick(8);
      break;
    case 1:  // random bytes anywhere
      for (size_t k = 0, n = 1 + pick(8); k < n; ++k) (*bytes)[pick(size)] = (char)pick(256);
      break;
    case 2: {  // a zeroed range
      const size_t at = pick(size), n = 1 + pick(64);
      for (size_t k = at; k < size && k < at + n; ++k) (*bytes)[k] = 0;
      break;
    }
    default: {  // bit flips aimed at HDF5 metadata
      static const char* kSignatures[] = {"GCOL", "TREE", "HEAP", "SNOD"};
      const size_t at = bytes->find(kSignatures[pick(4)]);
      const size_t base = at == std::string::npos ? 0 : at;
      const size_t span = std::min<size_t>(size - base, 4096);
      for (size_t k = 0, n = 1 + pick(2); k < n; ++k) {
        (*bytes)[base + pick(span)] ^= 1 << pick(8);
      }
    }
  }
}

struct Figures {
  int64_t mutants = 0, hangs = 0, crashes = 0;
  std::map<std::string, int64_t> outcomes;  // "verify exit 0", "show exit 1", ...
};

// Runs `mmpack args...` with its output discarded; false when it hung or crashed.
bool RunMmpack(const std::vector<std::string>& args, Figures* f) {
  const std::string binary = std::string(MM_BIN_DIR) + "/mmpack";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::alarm(120);  // kept across exec
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr)) {
      ::_exit(126);
    }
    std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::kill(-pid, SIGKILL);  // a query child it left behind, if any
  if (WIFSIGNALED(status)) {
    const bool hang = WTERMSIG(status) == SIGALRM;
    (hang ? f->hangs : f->crashes) += 1;
    std::printf("mutant: mmpack %s %s (signal %d)\n", args[0].c_str(), hang ? "hung" : "crashed",
                WTERMSIG(status));
    return false;
  }
  ++f->outcomes[args[0] + " exit " + std::to_string(WEXITSTATUS(status))];
  return true;
}

// The fuzz run over a seed set of raw pixels (format 1) or stored JPEGs at their own aspect ratio
// (format 2: most of a mutant's random bytes then land in JPEG data, the rest in the offsets and
// sizes the reader maps).
void FuzzSeedSet(bool jpeg, int64_t default_mutants) {
  const int64_t mutants = EnvInt("MM_FUZZ_MUTANTS", default_mutants);
  std::mt19937_64 rng(static_cast<uint64_t>(EnvInt("MM_FUZZ_SEED", 1)));
  TempDir tmp;
  const fs::path set = tmp / "set";
  BuildOptions o;
  o.input = (DataDir() / "coco-cc" / "captions.jsonl").string();
  o.output = set.string();
  o.tokenizer = AlbertModel();
  o.image_width = o.image_height = 24;
  if (jpeg) {
    o.image_codec = format::ImageCodec::kJpeg;
    o.compression = format::Codec::kNone;
    o.resize_mode = format::ResizeMode::kKeepRatioLargest;
    o.max_size = o.image_width = o.image_height = 32;
  }
  o.samples_per_shard = 8;
  o.keep_fields = o.fields.extra = {"license"};  // a metadata group of vlen strings too
  o.threads = 2;
  o.quiet = true;
  ASSERT_TRUE(RunBuild(o).ok());
  const json index = json::parse(ReadBytes(set / "index.json"));
  std::vector<std::string> originals;
  std::vector<int64_t> first_sample = {0};
  for (const auto& s : index["shards"]) {
    originals.push_back(ReadBytes(set / s["file"].get<std::string>()));
    first_sample.push_back(first_sample.back() + s["samples"].get<int64_t>());
  }
  const char* keep = std::getenv("MM_FUZZ_KEEP");
  Figures f;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t m = 0; m < mutants; ++m) {
    const size_t k = static_cast<size_t>(rng() % originals.size());
    const std::string file = index["shards"][k]["file"].get<std::string>();
    std::string bytes = originals[k];
    Mutate(&rng, &bytes);
    WriteBytes(set / file, bytes);
    json mutated = index;
    if (rng() % 4 != 0) {
      mutated["shards"][k]["xxh3_64"] = Xxh3Hex(bytes.data(), bytes.size());
    }
    WriteBytes(set / "index.json", mutated.dump());
    const std::string dir = set.string();
    const std::string sample = std::to_string(first_sample[k] + static_cast<int64_t>(rng() % 8));
    bool bad = !RunMmpack({"verify", dir}, &f);
    bad |= !RunMmpack({"show", dir, sample, "-o", (tmp / "show.png").string()}, &f);
    bad |=
        !RunMmpack({"bench", dir, "--seconds", "0.02", "--threads", "1", "--batch-size", "4"}, &f);
    ++f.mutants;
    if (bad) {
      const fs::path saved = fs::path(keep ? keep : tmp.path().string()) /
                             ("mutant-" + std::to_string(m) + "-" + file);
      fs::create_directories(saved.parent_path());
      WriteBytes(saved, bytes);
      ADD_FAILURE() << "mutant " << m << " of " << file << " hung or crashed; saved " << saved;
    }
    WriteBytes(set / file, originals[k]);
    if (f.mutants % 250 == 0) {  // a long run stopped by hand still leaves its figures
      std::printf("shard fuzz: %lld mutants so far, %lld hangs, %lld crashes\n",
                  static_cast<long long>(f.mutants), static_cast<long long>(f.hangs),
                  static_cast<long long>(f.crashes));
      std::fflush(stdout);
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("shard fuzz: %lld mutants in %.1f s, %lld hangs, %lld crashes\n",
              static_cast<long long>(f.mutants), seconds, static_cast<long long>(f.hangs),
              static_cast<long long>(f.crashes));
  for (const auto& [what, n] : f.outcomes) {
    std::printf("  %-24s %lld\n", what.c_str(), static_cast<long long>(n));
  }
  EXPECT_EQ(f.hangs, 0);
  EXPECT_EQ(f.crashes, 0);
  EXPECT_EQ(f.mutants, mutants);
}

TEST(ShardFuzz, MutantsOfRealShardsThroughVerifyShowAndBenchNeitherHangNorCrash) {
  FuzzSeedSet(/*jpeg=*/false, 100);
}

TEST(ShardFuzz, MutantsOfJpegShardsThroughVerifyShowAndBenchNeitherHangNorCrash) {
  FuzzSeedSet(/*jpeg=*/true, 60);
}

}  // namespace
}  // namespace mm::pack
