// mm_train_test: the trainer, checked by running the real mmtrain binary (and mpirun) on real
// shards that the ctest fixture mm_train_shards packs with the real mmpack from
// ../shared/data (make_train_shards.py), plus a few in-process checks of the pieces.
// Never links sentencepiece (see ../shared/DESIGN.md).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "distributed.h"
#include "model.h"
#include "resume_plan.h"

namespace {

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

const std::string kBin = Env("MM_BIN_DIR", MM_BIN_DIR);
const std::string kShards = Env("MM_TRAIN_SHARDS", MM_TRAIN_SHARDS);

std::string Mmtrain() { return kBin + "/mmtrain"; }

/// The directories TempDir made in this process (ctest runs one test per process), removed after
/// the tests unless one failed or MM_KEEP_TMP is set: checkpoints take tens of MB a run, and
/// the /tmp of a CI machine is small.
class TempDirs : public testing::Environment {
 public:
  void TearDown() override {
    if (std::getenv("MM_KEEP_TMP") || !testing::UnitTest::GetInstance()->Passed()) return;
    for (const std::string& dir : dirs_) {
      std::string cmd = "rm -rf '" + dir + "'";
      if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
    }
  }
  void Add(const std::string& dir) { dirs_.push_back(dir); }

 private:
  std::vector<std::string> dirs_;
};
TempDirs* const temp_dirs = static_cast<TempDirs*>(testing::AddGlobalTestEnvironment(new TempDirs));

/// A fresh directory under the test's temp dir.
std::string TempDir(const std::string& name) {
  std::string dir = testing::TempDir() + "mm_train_" + name + "_" + std::to_string(::getpid());
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  temp_dirs->Add(dir);
  return dir;
}

/// Runs a shell command, its output appended to `log`; returns the exit status.
int RunCmd(const std::string& cmd, const std::string& log) {
  std::string full = "(" + cmd + ") >>'" + log + "' 2>&1";
  int rc = std::system(full.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<torch::Tensor> LoadTensors(const std::string& path) {
  std::vector<torch::Tensor> v;
  torch::load(v, path);
  return v;
}

nlohmann::json Summary(const std::string& run) {
  return nlohmann::json::parse(ReadFile(run + "/summary.json"));
}

/// Largest per-tensor relative difference ||a - b|| / ||b|| (0 when both are zero).
double MaxRelativeDiff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double diff = (a[i].to(torch::kDouble) - b[i].to(torch::kDouble)).norm().item<double>();
    const double ref = b[i].to(torch::kDouble).norm().item<double>();
    worst = std::max(worst, ref == 0 ? diff : diff / ref);
  }
  return worst;
}

bool BitwiseEqual(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

// A small model on the 64x64 coco-cc shards: seconds a step on one core.
const std::string kSmallModel =
    " --dim 64 --layers 1 --heads 4 --patch 16 --threads 1 --loader-threads 1 --seed 7 --quiet";
const std::string kSmall = kSmallModel + " --log-every 5";

class TrainerTest : public testing::Test {
 protected:
  void SetUp() override {
    // mmtrain reads the zstd-compressed shards through the plugin only for HDF5 fallbacks,
    // but keep the tests' environment complete.
    ::setenv("HDF5_PLUGIN_PATH", Env("HDF5_PLUGIN_PATH", MM_PLUGIN_DIR).c_str(), 1);
    struct stat st;
    ASSERT_EQ(::stat((kShards + "/coco/index.json").c_str(), &st), 0)
        << "no shards in " << kShards << ": run through ctest (fixture mm_train_shards)";
  }
};

// --- the checks --------------------------------------------------------------------------

TEST_F(TrainerTest, AccumulationOfFourByEightEqualsOneBatchOf32ForBothLosses) {
  // Both losses on: the contrastive loss of 4 micro-batches of 8 is one InfoNCE over all 32
  // (gradient caching), as 1 x 32. The train split (326 images) keeps 10 steps of 32 inside
  // one epoch, so both runs see the same items in every step.
  const std::string dir = TempDir("accum"), log = dir + "/log";
  const std::string common = Mmtrain() + " --shards " + kShards + "/train --steps 10" + kSmall;
  ASSERT_EQ(RunCmd(common + " --batch-size 8 --accum-steps 4 --dump-grads " + dir +
                       "/g4.pt --dump-params " + dir + "/p4.pt",
                   log),
            0)
      << ReadFile(log);
  ASSERT_EQ(RunCmd(common + " --batch-size 32 --accum-steps 1 --dump-grads " + dir +
                       "/g1.pt --dump-params " + dir + "/p1.pt",
                   log),
            0)
      << ReadFile(log);
  auto g4 = LoadTensors(dir + "/g4.pt"), g1 = LoadTensors(dir + "/g1.pt");
  const double rel = MaxRelativeDiff(g4, g1);
  const double prel = MaxRelativeDiff(LoadTensors(dir + "/p4.pt"), LoadTensors(dir + "/p1.pt"));
  std::printf(
      "accumulation 4x8 vs 1x32, both losses: first-step gradients max per-tensor relative "
      "difference %.3g, parameters after 10 steps %.3g\n",
      rel, prel);
  EXPECT_LT(rel, 1e-5);
  EXPECT_LT(prel, 1e-5);
  // Not vacuous: the gradients are not zero.
  double norm = 0;
  for (auto& g : g1) norm += g.norm().item<double>();
  EXPECT_GT(norm, 0.0);
}

TEST_F(TrainerTest, AccumulationDiffersFromOneMicroBatchAlone) {
  // The check above can fail: K=1 x B=8 gives other gradients than K=4 x B=8.
  const std::string dir = TempDir("accum_neg"), log = dir + "/log";
  const std::string common = Mmtrain() + " --shards " + kShards + "/train --steps 1" + kSmall;
  ASSERT_EQ(RunCmd(common + " --batch-size 8 --accum-steps 1 --dump-grads " + dir + "/g.pt", log),
            0);
  ASSERT_EQ(RunCmd(common + " --batch-size 32 --dump-grads " + dir + "/g1.pt", log), 0);
  EXPECT_GT(MaxRelativeDiff(LoadTensors(dir + "/g.pt"), LoadTensors(dir + "/g1.pt")), 1e-2);
}

/// 1 process x 16 against 2 ranks x `per_rank` (x `accum` micro-batches), `steps` steps, both
/// losses on (the contrastive one over the global batch: embeddings gathered across ranks).
/// `two_flags` go to the two-rank run only. It writes its summary to DIR/two/summary.json.
void ExpectDdpMatchesSingleProcess(const std::string& dir, const std::string& launch_two,
                                   int steps = 20, int per_rank = 8, int accum = 1,
                                   const std::string& two_flags = "") {
  const std::string log = dir + "/log";
  const std::string common =
      " --shards " + kShards + "/coco --steps " + std::to_string(steps) + kSmall;
  ASSERT_EQ(RunCmd(Mmtrain() + common + " --batch-size 16 --out " + dir + "/one --dump-params " +
                       dir + "/p1.pt --dump-grads " + dir + "/g1.pt",
                   log),
            0)
      << ReadFile(log);
  ASSERT_EQ(
      RunCmd(launch_two + common + " --batch-size " + std::to_string(per_rank) + " --accum-steps " +
                 std::to_string(accum) + " --out " + dir + "/two --dump-params " + dir +
                 "/p2.pt --dump-grads " + dir + "/g2.pt " + two_flags,
             log),
      0)
      << ReadFile(log);
  // The first step's reduced gradients themselves: AdamW is nearly blind to a constant factor
  // (a sum instead of a mean over ranks), the gradients are not.
  auto g1 = LoadTensors(dir + "/g1.pt");
  auto g2r0 = LoadTensors(dir + "/g2.pt.rank0"), g2r1 = LoadTensors(dir + "/g2.pt.rank1");
  EXPECT_TRUE(BitwiseEqual(g2r0, g2r1)) << "ranks hold different reduced gradients";
  const double grel = MaxRelativeDiff(g2r0, g1);
  std::printf("DDP first-step gradients vs 1 x 16: max per-tensor relative difference %.3g\n",
              grel);
  EXPECT_LT(grel, 1e-5);
  auto p1 = LoadTensors(dir + "/p1.pt");
  auto r0 = LoadTensors(dir + "/p2.pt.rank0"), r1 = LoadTensors(dir + "/p2.pt.rank1");
  EXPECT_TRUE(BitwiseEqual(r0, r1)) << "ranks disagree after 20 steps";
  const double rel = MaxRelativeDiff(r0, p1);
  std::printf(
      "DDP 2 ranks x %d x %d micro-batches vs 1 x 16 after %d steps: max per-tensor "
      "relative parameter difference %.3g\n",
      per_rank, accum, steps, rel);
  EXPECT_LT(rel, 1e-5);
  EXPECT_NE(ReadFile(log).find("world 2"), std::string::npos) << ReadFile(log);
  // The loss the two ranks report is the global batch's, the one process's.
  const double one = Summary(dir + "/one")["final_loss"], two = Summary(dir + "/two")["final_loss"];
  std::printf("final loss: 1 x 16 %.6f, 2 ranks %.6f\n", one, two);
  EXPECT_NEAR(two, one, 1e-4 * one);
}

std::string Mpirun2() {
  return "mpirun -n 2 --allow-run-as-root --oversubscribe -x HDF5_PLUGIN_PATH -x MASTER_PORT=" +
         std::to_string(FreePort()) + " " + Mmtrain();
}

TEST_F(TrainerTest, DdpTwoRanksUnderMpirunMatchOneRankWithTheSameGlobalBatch) {
  const std::string dir = TempDir("ddp_mpi");
  ExpectDdpMatchesSingleProcess(dir, Mpirun2());
  // One reduction round per step (counted by the all-reduce hook), every round all buckets.
  auto s = Summary(dir + "/two");
  EXPECT_EQ(s["steps_run"].get<int64_t>(), 20);
  EXPECT_EQ(s["allreduce_rounds"].get<int64_t>(), 20);
  EXPECT_GE(s["allreduce_buckets"].get<int64_t>(), 20);
}

TEST_F(TrainerTest, DdpWithLocalLossMatchesOneRank) {
  // --local-loss: each rank's rows against all gathered columns; the same gradient.
  ExpectDdpMatchesSingleProcess(TempDir("ddp_local"), Mpirun2(), /*steps=*/20, /*per_rank=*/8,
                                /*accum=*/1, "--local-loss");
}

TEST_F(TrainerTest, DdpWithAccumulationAllReducesOncePerStepNotPerMicroBatch) {
  // 2 ranks x 4 items x 2 micro-batches == 1 x 16, both losses (within 1e-5 after 10 steps,
  // ranks bitwise equal): the gathered embeddings of both micro-batches of both ranks enter one
  // InfoNCE (gradient caching over a gather). The result alone cannot tell one reduction of the
  // accumulated gradient from one reduction per micro-batch (the mean of sums is the sum of means,
  // up to rounding), so the reductions themselves are counted: the Reducer's all-reduce runs
  // through a hook of ours that counts bucket all-reduces and complete rounds. Arming the Reducer
  // on every micro-batch would give 20 rounds here, not 10.
  const std::string dir = TempDir("ddp_accum");
  ExpectDdpMatchesSingleProcess(dir, Mpirun2(), /*steps=*/10, /*per_rank=*/4, /*accum=*/2);
  auto s = Summary(dir + "/two");
  const int64_t steps = s["steps_run"], rounds = s["allreduce_rounds"];
  const int64_t buckets = s["allreduce_buckets"];
  std::printf(
      "2 ranks, --accum-steps 2: %lld optimizer steps, %lld reduction rounds, %lld "
      "bucket all-reduces\n",
      static_cast<long long>(steps), static_cast<long long>(rounds),
      static_cast<long long>(buckets));
  EXPECT_EQ(steps, 10);
  EXPECT_EQ(rounds, steps);
  EXPECT_GE(buckets, rounds);
  EXPECT_LE(buckets, 100 * rounds);  // a few buckets a round, not one per parameter
}

TEST_F(TrainerTest, DdpWithAccumulationAndLocalLossMatchesOneRank) {
  // --local-loss with gradient caching across ranks: each rank's K*B cached rows (labels
  // rank*K*B + i) against all W*K*B gathered columns; still the gradient of 1 x 16.
  ExpectDdpMatchesSingleProcess(TempDir("ddp_accum_local"), Mpirun2(), /*steps=*/10,
                                /*per_rank=*/4, /*accum=*/2, "--local-loss");
}

TEST_F(TrainerTest, DdpTwoRanksFromPlainEnvironmentVariablesMatchOneRank) {
  const std::string dir = TempDir("ddp_env");
  // GLOO_SOCKET_IFNAME=lo: Gloo binds to the named interface (the mpirun tests cover the
  // default, an address derived from MASTER_ADDR).
  const std::string env =
      "GLOO_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(FreePort()) +
      " WORLD_SIZE=2 ";
  // Both ranks in the background; the shell's status is non-zero when either fails.
  const std::string two = "sh -c '" + env + "RANK=0 LOCAL_RANK=0 \"$0\" \"$@\" & a=$!; " + env +
                          "RANK=1 LOCAL_RANK=1 \"$0\" \"$@\" & b=$!; wait $a; ra=$?; wait $b; "
                          "rb=$?; exit $((ra|rb))' " +
                          Mmtrain();
  ExpectDdpMatchesSingleProcess(dir, two);
}

/// A launcher script standing in for torchrun 2.x's agent: it hosts the job's TCPStore (torch's
/// own, from Python) on MASTER_PORT and starts two ranks with torchrun's variables, agent store
/// flag `agent_store`; status non-zero when either rank fails.
std::string AgentLauncher(const std::string& dir, const std::string& agent_store) {
  const std::string script = dir + "/agent_" + agent_store + ".sh";
  std::ofstream(script) << "port=" << FreePort() << "\n"
                        << "/usr/bin/python3 -c 'import sys, time, torch.distributed as d\n"
                           "s = d.TCPStore(\"127.0.0.1\", int(sys.argv[1]), 2, True, "
                           "wait_for_workers=False)\n"
                           "time.sleep(100)' $port & st=$!\n"
                           "export MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 "
                           "TORCHELASTIC_RESTART_COUNT=1 TORCHELASTIC_USE_AGENT_STORE="
                        << agent_store << "\n"
                        << "RANK=0 LOCAL_RANK=0 \"$@\" & a=$!\n"
                           "RANK=1 LOCAL_RANK=1 \"$@\" & b=$!\n"
                           "wait $a; ra=$?; wait $b; rb=$?; kill $st\n"
                           "exit $((ra|rb))\n";
  return "sh " + script + " ";
}

TEST_F(TrainerTest, UnderTorchrunsAgentStoreRankZeroConnectsAsAClient) {
  // torchrun 2.x hosts the TCPStore in its agent and says so with
  // TORCHELASTIC_USE_AGENT_STORE=True: every rank, rank 0 included, connects to it as a client.
  // (Debian's torchrun 1.13 crashes on start: the agent's store is torch's TCPStore from Python.)
  const std::string dir = TempDir("agent_store"), log = dir + "/log";
  const std::string args = Mmtrain() + " --shards " + kShards +
                           "/coco --steps 2 --batch-size 8 --dist-timeout 60" + kSmall;
  ASSERT_EQ(RunCmd(AgentLauncher(dir, "True") + args, log), 0) << ReadFile(log);
  EXPECT_NE(ReadFile(log).find("world 2 (torchrun)"), std::string::npos) << ReadFile(log);
  // The check can fail: told there is no agent store, rank 0 tries to serve one on the port
  // the agent holds, and the job fails instead of training.
  const std::string bad = dir + "/log_no_agent";
  EXPECT_NE(RunCmd(AgentLauncher(dir, "False") + args + " --dist-timeout 15", bad), 0)
      << ReadFile(bad);
}

TEST_F(TrainerTest, GlooSocketIfnameNamingNoInterfaceFailsOnEveryRank) {
  // The other side of GLOO_SOCKET_IFNAME=lo above: the variable is read, not ignored.
  const std::string dir = TempDir("ifname"), log = dir + "/log";
  const std::string env = "GLOO_SOCKET_IFNAME=mm_no_such_if0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                          std::to_string(FreePort()) + " WORLD_SIZE=2 ";
  const std::string args = " --shards " + kShards + "/coco --steps 1 --dist-timeout 20" + kSmall;
  const std::string two = env + "RANK=0 " + Mmtrain() + args + " & a=$!; " + env + "RANK=1 " +
                          Mmtrain() + args + " & b=$!; wait $a; ra=$?; wait $b; rb=$?; " +
                          "test $ra -ne 0 && test $rb -ne 0";
  EXPECT_EQ(RunCmd(two, log), 0) << ReadFile(log);
  EXPECT_NE(ReadFile(log).find("mm_no_such_if0"), std::string::npos) << ReadFile(log);
}

TEST_F(TrainerTest, Bf16AutocastTrainsWithinTwoPercentOfFp32) {
  const std::string dir = TempDir("amp"), log = dir + "/log";
  const std::string common =
      Mmtrain() + " --shards " + kShards + "/coco --steps 30 --batch-size 16" + kSmall;
  ASSERT_EQ(RunCmd(common + " --amp off --out " + dir + "/fp32", log), 0) << ReadFile(log);
  ASSERT_EQ(RunCmd(common + " --amp bf16 --out " + dir + "/bf16", log), 0) << ReadFile(log);
  auto a = Summary(dir + "/fp32"), b = Summary(dir + "/bf16");
  const double first = a["first_caption_loss"], fp32 = a["final_caption_loss"];
  const double bf16 = b["final_caption_loss"];
  std::printf("caption loss after 30 steps: fp32 %.4f, bf16 %.4f (start %.4f), rel diff %.4f\n",
              fp32, bf16, first, std::fabs(bf16 - fp32) / fp32);
  EXPECT_LT(fp32, first);
  EXPECT_LT(bf16, first);
  EXPECT_LT(std::fabs(bf16 - fp32) / fp32, 0.02);
}

TEST_F(TrainerTest, ResumeAtStep30Of60GivesBitwiseEqualParameters) {
  const std::string dir = TempDir("resume"), log = dir + "/log";
  const std::string common = Mmtrain() + " --shards " + kShards +
                             "/coco --steps 60 --batch-size 8 --save-every 30" + kSmall;
  ASSERT_EQ(RunCmd(common + " --out " + dir + "/full --dump-params " + dir + "/full.pt", log), 0)
      << ReadFile(log);
  ASSERT_EQ(RunCmd(common + " --out " + dir + "/a --stop-after 30", log), 0) << ReadFile(log);
  ASSERT_EQ(RunCmd(common + " --out " + dir + "/b --resume " + dir + "/a/checkpoint-000030.pt" +
                       " --dump-params " + dir + "/resumed.pt",
                   log),
            0)
      << ReadFile(log);
  auto full = LoadTensors(dir + "/full.pt"), resumed = LoadTensors(dir + "/resumed.pt");
  EXPECT_TRUE(BitwiseEqual(full, resumed))
      << "max relative difference " << MaxRelativeDiff(resumed, full);
  // No temporary checkpoint files are left behind.
  EXPECT_NE(RunCmd("ls " + dir + "/a/*.tmp.* 2>/dev/null", log), 0);
}

TEST_F(TrainerTest, LearnsCaptionsAndBeatsChanceRecallOnHeldOutImages) {
  // train/val: a split by a hash of the image path, every category on both sides
  // (make_train_shards.py); 72 val images none of which, nor their captions, is trained on.
  const std::string dir = TempDir("learn"), log = dir + "/log";
  ASSERT_EQ(RunCmd(Mmtrain() + " --shards " + kShards + "/train --val-shards " + kShards +
                       "/val --out " + dir +
                       "/run --steps 60 --batch-size 32 --patch 16 --threads 1"
                       " --amp bf16 --lr 1e-3 --eval-every 30 --log-every 10",
                   log),
            0)
      << ReadFile(log);
  std::printf("%s", ReadFile(log).c_str());
  auto s = Summary(dir + "/run");
  const double first = s["first_caption_loss"], last = s["final_caption_loss"];
  const double n = s["val_n"];
  EXPECT_LT(last, 0.8 * first);
  // Above chance by a margin in both directions: at chance, recall@5 over N=72 has a standard
  // deviation of sqrt(p(1-p)/N) = 0.030 around p = 5/N = 0.069; twice chance is more than two
  // of them away. (Measured here: i2t 0.194, t2i 0.222 after 60 steps.)
  for (const char* key : {"val_i2t_r5", "val_t2i_r5"}) {
    EXPECT_GT(s[key].get<double>(), 2 * 5.0 / n)
        << key << " not clearly above chance (" << 5.0 / n << ")";
  }
  // metrics.jsonl holds train, eval and summary lines.
  const std::string metrics = ReadFile(dir + "/run/metrics.jsonl");
  EXPECT_NE(metrics.find("\"event\":\"eval\""), std::string::npos);
  EXPECT_NE(metrics.find("\"data_wait_pct\""), std::string::npos);
}

TEST_F(TrainerTest, AugmentRrcTrainsOnOtherPixelsThanTheStoredImages) {
  // Same seed, model and sample order: only the images differ, so the first step's caption
  // loss (the decoder attends to the image) tells whether --augment rrc reached the loader.
  const std::string dir = TempDir("augment"), log = dir + "/log";
  const std::string common =
      Mmtrain() + " --shards " + kShards + "/coco --steps 2 --batch-size 8" + kSmall;
  ASSERT_EQ(RunCmd(common + " --out " + dir + "/none", log), 0) << ReadFile(log);
  ASSERT_EQ(RunCmd(common + " --augment rrc --out " + dir + "/rrc", log), 0) << ReadFile(log);
  const double none = Summary(dir + "/none")["first_caption_loss"];
  const double rrc = Summary(dir + "/rrc")["first_caption_loss"];
  EXPECT_NE(none, rrc);
  EXPECT_NE(ReadFile(dir + "/rrc/metrics.jsonl").find("\"augment\":\"rrc\""), std::string::npos);
  // The same command again gives the same crops: the windows are drawn per (seed, epoch,
  // sample), not from a clock or a thread's stream.
  ASSERT_EQ(RunCmd(common + " --augment rrc --out " + dir + "/rrc2", log), 0) << ReadFile(log);
  EXPECT_EQ(Summary(dir + "/rrc2")["first_caption_loss"].get<double>(), rrc);
}

// --- failures are one clear line -----------------------------------------------------------------

TEST_F(TrainerTest, Fp16OnCpuFailsWithAClearError) {
  const std::string dir = TempDir("fp16"), log = dir + "/log";
  EXPECT_NE(RunCmd(Mmtrain() + " --shards " + kShards + "/coco --steps 1 --amp fp16" + kSmall, log),
            0);
  EXPECT_NE(ReadFile(log).find("--amp fp16 needs a CUDA device"), std::string::npos)
      << ReadFile(log);
}

TEST_F(TrainerTest, MissingShardsFailWithOneLine) {
  const std::string dir = TempDir("missing"), log = dir + "/log";
  EXPECT_NE(RunCmd(Mmtrain() + " --shards " + dir + "/nope --steps 1", log), 0);
  const std::string out = ReadFile(log);
  EXPECT_NE(out.find("mmtrain (rank 0): error: opening --shards"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

TEST_F(TrainerTest, UnknownAugmentIsRefused) {
  const std::string dir = TempDir("augment_bogus"), log = dir + "/log";
  EXPECT_NE(RunCmd(Mmtrain() + " --shards " + kShards + "/coco --steps 1 --augment bogus --out " +
                       dir + "/run" + kSmall,
                   log),
            0);
  EXPECT_NE(ReadFile(log).find("--augment"), std::string::npos) << ReadFile(log);
  struct stat st;
  EXPECT_NE(::stat((dir + "/run/metrics.jsonl").c_str(), &st), 0) << "it trained anyway";
}

// --- hostile sizes and files ---------------------------------------------------------------------

/// Runs mmtrain with `args` under `timeout 60` (a hang shows as status 124); returns the status
/// and puts the output in *out.
int RunMmtrain(const std::string& args, const std::string& dir, std::string* out) {
  static int runs = 0;
  const std::string log = dir + "/log_" + std::to_string(++runs);
  const int rc = RunCmd("timeout 60 " + Mmtrain() + " " + args, log);
  *out = ReadFile(log);
  return rc;
}

/// The run failed with exactly one line, "mmtrain (rank 0): error: ...", holding `needle`.
void ExpectOneErrorLine(int rc, const std::string& out, const std::string& needle) {
  EXPECT_EQ(rc, 1) << out;  // not 124 (hung), not 134 (aborted)
  EXPECT_EQ(out.rfind("mmtrain (rank 0): error: ", 0), 0u) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find(needle), std::string::npos) << "no '" << needle << "' in: " << out;
}

TEST_F(TrainerTest, HugeResourceFlagsAreRefusedWithOneLineNotAHangOrAbort) {
  // Before: --accum-steps 1e9 and --threads 5000 hung, --loader-threads 100000 aborted
  // ("terminate called without an active exception").
  const std::string dir = TempDir("huge");
  const std::string base = "--shards " + kShards + "/coco --steps 1 --dim 64 --layers 1 --patch 16";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--accum-steps 1000000000", "--accum-steps 1000000000 is outside [1, 65536]"},
      {"--batch-size 2000000000", "--batch-size 2000000000 is outside [1, 65536]"},
      {"--threads 5000", "--threads 5000 is outside [0, "},
      {"--loader-threads 100000", "--loader-threads 100000 is outside [1, 256]"},
      {"--prefetch 1000000000", "--prefetch 1000000000 is outside [1, 1024]"},
      // Within each bound, but 65536 x 65536 images of 64x64 as float32 are 211 TB a step.
      {"--accum-steps 65536 --batch-size 65536", "of images a step, more than half of this"},
  };
  for (const auto& [flags, needle] : cases) {
    std::string out;
    const int rc = RunMmtrain(base + " " + flags, dir, &out);
    SCOPED_TRACE(flags);
    ExpectOneErrorLine(rc, out, needle);
  }
}

/// A run of the small model on coco for 4 steps stopped after 2, with a checkpoint at step 2 in
/// DIR/run.
std::string SmallRunWithCheckpoint(const std::string& dir) {
  const std::string log = dir + "/log";
  EXPECT_EQ(RunCmd(Mmtrain() + " --shards " + kShards + "/coco --steps 4 --batch-size 8" + kSmall +
                       " --out " + dir + "/run --save-every 2 --stop-after 2",
                   log),
            0)
      << ReadFile(log);
  return dir + "/run/checkpoint-000002.pt";
}

TEST_F(TrainerTest, DamagedCheckpointIsRefusedNamingTheFile) {
  // Before: 64 corrupted bytes in the tensor data resumed silently with wrong weights
  // (LibTorch's zip reader skips the CRCs).
  const std::string dir = TempDir("damaged");
  const std::string ckpt = SmallRunWithCheckpoint(dir);
  const std::string bytes = ReadFile(ckpt);
  ASSERT_GT(bytes.size(), 100000u);
  const std::string resume = " --shards " + kShards + "/coco --steps 4 --batch-size 8" + kSmall;
  std::string out;
  // The intact file resumes (the check is not simply refusing everything).
  ASSERT_EQ(RunMmtrain(resume + " --resume " + ckpt, dir, &out), 0) << out;
  std::string damaged = bytes;
  for (size_t i = 0; i < 64; ++i) damaged[bytes.size() / 2 + i] ^= 0x5a;
  std::ofstream(dir + "/damaged.pt", std::ios::binary) << damaged;
  ExpectOneErrorLine(RunMmtrain(resume + " --resume " + dir + "/damaged.pt", dir, &out), out,
                     "checkpoint " + dir + "/damaged.pt is damaged");
  std::ofstream(dir + "/short.pt", std::ios::binary) << bytes.substr(0, bytes.size() / 3);
  ExpectOneErrorLine(RunMmtrain(resume + " --resume " + dir + "/short.pt", dir, &out), out,
                     "checkpoint " + dir + "/short.pt has no mmtrain checksum trailer");
}

TEST_F(TrainerTest, ResumeOnOtherShardsIsRefusedUnlessOverridden) {
  // Before: a checkpoint trained on coco resumed on the train split without a word.
  const std::string dir = TempDir("othershards");
  const std::string ckpt = SmallRunWithCheckpoint(dir);
  const std::string other = " --shards " + kShards + "/val --batch-size 8" + kSmall;
  std::string out;
  ExpectOneErrorLine(RunMmtrain(other + " --resume " + ckpt, dir, &out), out,
                     "--shards " + kShards + "/val is not the training set of --resume " + ckpt);
  EXPECT_NE(out.find("--resume-override"), std::string::npos) << out;
  // Overridden, it trains on (both sets were packed with --max-tokens 32: the same model).
  EXPECT_EQ(RunMmtrain(other + " --resume " + ckpt + " --resume-override", dir, &out), 0) << out;
  EXPECT_NE(out.find("training set differs from the checkpoint's"), std::string::npos) << out;
}

TEST_F(TrainerTest, FifosAreRefusedNotWaitedOn) {
  // Before: --resume FIFO and a FIFO standing as RUN/metrics.jsonl blocked in open() for ever.
  const std::string dir = TempDir("fifo");
  ASSERT_EQ(::mkfifo((dir + "/ckpt.pt").c_str(), 0644), 0);
  ASSERT_EQ(::mkdir((dir + "/run").c_str(), 0755), 0);
  ASSERT_EQ(::mkfifo((dir + "/run/metrics.jsonl").c_str(), 0644), 0);
  const std::string base = " --shards " + kShards + "/coco --steps 1 --batch-size 8" + kSmall;
  std::string out;
  ExpectOneErrorLine(RunMmtrain(base + " --resume " + dir + "/ckpt.pt", dir, &out), out,
                     "reading checkpoint: cannot read " + dir + "/ckpt.pt: not a regular file");
  ExpectOneErrorLine(RunMmtrain(base + " --out " + dir + "/run", dir, &out), out,
                     dir + "/run/metrics.jsonl is not a regular file");
}

// --- resume that cannot go wrong silently, metrics, evaluation, plots ----------------------------

std::vector<nlohmann::json> MetricsLines(const std::string& path) {
  std::vector<nlohmann::json> v;
  std::istringstream in(ReadFile(path));
  for (std::string line; std::getline(in, line);) v.push_back(nlohmann::json::parse(line));
  return v;
}

nlohmann::json FirstEvent(const std::string& run, const std::string& event) {
  for (auto& j : MetricsLines(run + "/metrics.jsonl"))
    if (j["event"] == event) return j;
  return {};
}

// Flags of the process, not of the run: a resume repeats these only.
const std::string kProcess = " --threads 1 --loader-threads 1 --quiet";

TEST_F(TrainerTest, ResumeTakesTheFlagsItIsNotGivenFromTheCheckpoint) {
  // Before: a resume without the run's flags trained on with the defaults (AMP off, batch 32,
  // lr 1e-3, another schedule) and no word.
  const std::string dir = TempDir("resume_defaults"), log = dir + "/log";
  const std::string run = Mmtrain() + " --shards " + kShards +
                          "/coco --steps 12 --batch-size 8 --amp bf16 --lr 2e-3 --warmup 3"
                          " --clip-grad 0.5 --dim 64 --layers 1 --heads 4 --patch 16 --seed 7"
                          " --save-every 6 --log-every 3" +
                          kProcess;
  ASSERT_EQ(RunCmd(run + " --out " + dir + "/full --dump-params " + dir + "/full.pt", log), 0)
      << ReadFile(log);
  ASSERT_EQ(RunCmd(run + " --out " + dir + "/a --stop-after 6", log), 0) << ReadFile(log);
  ASSERT_EQ(RunCmd(Mmtrain() + " --resume " + dir + "/a/checkpoint-000006.pt --dump-params " + dir +
                       "/resumed.pt" + kProcess,
                   log),
            0)
      << ReadFile(log);
  EXPECT_TRUE(BitwiseEqual(LoadTensors(dir + "/full.pt"), LoadTensors(dir + "/resumed.pt")))
      << "max relative difference "
      << MaxRelativeDiff(LoadTensors(dir + "/resumed.pt"), LoadTensors(dir + "/full.pt"));
  // --out came from the checkpoint too: the resumed run went on in dir/a.
  auto resume = FirstEvent(dir + "/a", "resume");
  ASSERT_TRUE(resume.is_object()) << ReadFile(dir + "/a/metrics.jsonl");
  EXPECT_EQ(resume["config"]["amp"], "bf16");
  EXPECT_EQ(resume["config"]["batch_size"], 8);
  EXPECT_EQ(resume["step"], 6);
  EXPECT_TRUE(resume["changes"].empty()) << resume.dump();
  EXPECT_EQ(Summary(dir + "/a")["step"], 12);
}

TEST_F(TrainerTest, ResumeRefusesAFlagThatChangesTheOptimisationUnlessOverridden) {
  const std::string dir = TempDir("resume_refuse");
  const std::string ckpt = SmallRunWithCheckpoint(dir);
  const std::string resume = " --resume " + ckpt + kProcess;
  std::string out;
  ExpectOneErrorLine(RunMmtrain(resume + " --lr 0.005", dir, &out), out,
                     "--lr 0.005 (checkpoint: 0.001)");
  EXPECT_NE(out.find("--resume-override"), std::string::npos) << out;
  ExpectOneErrorLine(RunMmtrain(resume + " --amp bf16", dir, &out), out,
                     "--amp \"bf16\" (checkpoint: \"off\")");
  ExpectOneErrorLine(RunMmtrain(resume + " --batch-size 16", dir, &out), out,
                     "global batch (--batch-size x --accum-steps x ranks) 16 (checkpoint: 8)");
  ExpectOneErrorLine(RunMmtrain(resume + " --steps 3", dir, &out), out,
                     "--steps 3 (checkpoint: 4)");
  // The same global batch split otherwise, and settings of the process or the logging: taken.
  ASSERT_EQ(
      RunMmtrain(resume + " --batch-size 4 --accum-steps 2 --log-every 1 --out " + dir + "/split",
                 dir, &out),
      0)
      << out;
  auto changes = FirstEvent(dir + "/split", "resume")["changes"];
  ASSERT_EQ(changes.size(), 4u)
      << changes.dump();  // --out, --batch-size, --accum-steps, --log-every
  for (const auto& c : changes) EXPECT_FALSE(c["changes_optimisation"].get<bool>()) << c.dump();
  // Overridden: accepted, and the change is in the metrics.
  ASSERT_EQ(RunMmtrain(resume + " --lr 0.005 --resume-override --out " + dir + "/over", dir, &out),
            0)
      << out;
  auto over = FirstEvent(dir + "/over", "resume");
  EXPECT_TRUE(over["resume_override"].get<bool>());
  ASSERT_EQ(over["changes"].size(), 2u) << over.dump();  // --out, --lr
  EXPECT_EQ(over["changes"][1]["flag"], "--lr");
  EXPECT_EQ(over["changes"][1]["now"], 0.005);
  EXPECT_TRUE(over["changes"][1]["changes_optimisation"].get<bool>());
  EXPECT_EQ(over["config"]["lr"], 0.005);
}

TEST_F(TrainerTest, ResumeMismatchNamesTheCheckpointModelsRealShape) {
  // Before: a run that left --dim to the preset saved dim 0 in its config, and a resume with
  // --dim 64 was refused as "--dim 64 (checkpoint: 0)" while the saved model has 128 (issue 31
  // item 8).
  const std::string dir = TempDir("resume_shape"), log = dir + "/log";
  ASSERT_EQ(RunCmd(Mmtrain() + " --shards " + kShards +
                       "/coco --steps 2 --batch-size 8 --layers 1 --patch 16 --threads 1"
                       " --loader-threads 1 --seed 7 --quiet --out " +
                       dir + "/run --save-every 1 --stop-after 1",
                   log),
            0)
      << ReadFile(log);
  const std::string resume = " --resume " + dir + "/run/checkpoint-000001.pt" + kProcess;
  std::string out;
  ExpectOneErrorLine(RunMmtrain(resume + " --dim 64", dir, &out), out,
                     "--dim 64 (checkpoint: 128)");
  // The preset's own value given: no change at all.
  ASSERT_EQ(RunMmtrain(resume + " --dim 128 --out " + dir + "/same", dir, &out), 0) << out;
  auto changes = FirstEvent(dir + "/same", "resume")["changes"];
  ASSERT_EQ(changes.size(), 1u) << changes.dump();  // --out only
  EXPECT_EQ(changes[0]["flag"], "--out");
}

TEST_F(TrainerTest, PlotSkipsALastLineCutByAKillAndSaysSo) {
  // Before: "line N is not JSON" and no plot for a run killed while it wrote metrics.jsonl.
  const std::string dir = TempDir("plot_torn"), log = dir + "/log";
  ASSERT_EQ(
      RunCmd(Mmtrain() + " --shards " + kShards + "/coco --steps 4 --batch-size 8 --log-every 1" +
                 kSmallModel + " --out " + dir + "/run",
             log),
      0)
      << ReadFile(log);
  const std::string metrics = ReadFile(dir + "/run/metrics.jsonl");
  const size_t last = metrics.rfind('\n', metrics.size() - 2);
  ASSERT_NE(last, std::string::npos);
  const std::string torn = metrics.substr(0, last + 1 + (metrics.size() - last) / 2);
  std::ofstream(dir + "/run/metrics.jsonl", std::ios::binary | std::ios::trunc) << torn;
  const int lines = static_cast<int>(std::count(torn.begin(), torn.end(), '\n')) + 1;
  const std::string plot_log = dir + "/plot_log";
  ASSERT_EQ(RunCmd(Mmtrain() + " plot " + dir + "/run -o " + dir + "/a.png", plot_log), 0)
      << ReadFile(plot_log);
  EXPECT_EQ(ReadFile(plot_log),
            "mmtrain plot: note: " + dir + "/run/metrics.jsonl line " + std::to_string(lines) +
                " is cut short (the run was stopped while writing it); skipped\n");
  struct stat st {};
  EXPECT_EQ(::stat((dir + "/a.png").c_str(), &st), 0);
  // The same damage before the last line is not a kill's: refused, no plot.
  std::ofstream(dir + "/run/metrics.jsonl", std::ios::binary | std::ios::trunc)
      << torn << "\n"
      << metrics.substr(last + 1);
  EXPECT_EQ(RunCmd(Mmtrain() + " plot " + dir + "/run -o " + dir + "/b.png", plot_log), 1);
  EXPECT_NE(ReadFile(plot_log).find("is not JSON"), std::string::npos) << ReadFile(plot_log);
}

TEST_F(TrainerTest, ResumeOnTwoRanksKeepsTheGlobalBatch) {
  // An elastic restart: trained on 1 rank x 16, resumed on 2 ranks with no batch flag: each
  // rank takes 8, and the run ends where an uninterrupted 1 x 16 run ends.
  const std::string dir = TempDir("resume_world"), log = dir + "/log";
  const std::string run = " --shards " + kShards +
                          "/coco --steps 12 --batch-size 16 --dim 64 --layers 1 --heads 4"
                          " --patch 16 --seed 7 --save-every 6" +
                          kProcess;
  ASSERT_EQ(
      RunCmd(Mmtrain() + run + " --out " + dir + "/full --dump-params " + dir + "/full.pt", log), 0)
      << ReadFile(log);
  ASSERT_EQ(RunCmd(Mmtrain() + run + " --out " + dir + "/a --stop-after 6", log), 0)
      << ReadFile(log);
  ASSERT_EQ(RunCmd(Mpirun2() + " --resume " + dir + "/a/checkpoint-000006.pt --out " + dir +
                       "/b --dump-params " + dir + "/two.pt" + kProcess,
                   log),
            0)
      << ReadFile(log);
  const double rel =
      MaxRelativeDiff(LoadTensors(dir + "/two.pt.rank0"), LoadTensors(dir + "/full.pt"));
  std::printf("resumed on 2 ranks x 8 after 6 steps of 1 x 16: relative difference %.3g\n", rel);
  EXPECT_LT(rel, 1e-5);
  auto resume = FirstEvent(dir + "/b", "resume");
  EXPECT_EQ(resume["world_size"], 2);
  EXPECT_EQ(resume["config"]["batch_size"], 8);
  // 16 does not split over 3 ranks: refused with the reason, not guessed.
  std::string out;
  const int rc = RunCmd("mpirun -n 3 --allow-run-as-root --oversubscribe -x MASTER_PORT=" +
                            std::to_string(FreePort()) + " " + Mmtrain() + " --resume " + dir +
                            "/a/checkpoint-000006.pt" + kProcess,
                        dir + "/log3");
  out = ReadFile(dir + "/log3");
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("does not split over 3 ranks"), std::string::npos) << out;
}

TEST_F(TrainerTest, MetricsHaveTimestampsAndNoDuplicateStepsAfterAResume) {
  const std::string dir = TempDir("metrics"), log = dir + "/log";
  const std::string run = Mmtrain() + " --shards " + kShards +
                          "/coco --steps 12 --batch-size 8 --save-every 6 --log-every 2 --out " +
                          dir + "/run" + kSmallModel;
  const double t0 = std::time(nullptr);
  // The whole run, then a resume from its step-6 checkpoint into the same directory, as after a
  // crash at step 12 that lost what came after the checkpoint.
  ASSERT_EQ(RunCmd(run, log), 0) << ReadFile(log);
  ASSERT_EQ(RunCmd(run + " --resume " + dir + "/run/checkpoint-000006.pt", log), 0)
      << ReadFile(log);
  const double t1 = std::time(nullptr) + 1;
  auto lines = MetricsLines(dir + "/run/metrics.jsonl");
  std::map<std::string, std::vector<int64_t>> steps;
  double last_time = 0;
  for (const auto& j : lines) {
    ASSERT_TRUE(j.contains("time") && j["time"].is_number()) << j.dump();
    const double t = j["time"];
    EXPECT_GE(t, t0 - 1);
    EXPECT_LE(t, t1);
    EXPECT_GE(t, last_time) << "time goes back at " << j.dump();
    last_time = t;
    steps[j["event"]].push_back(j["step"]);
  }
  EXPECT_EQ(steps["train"], (std::vector<int64_t>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(steps["start"], (std::vector<int64_t>{0}));
  EXPECT_EQ(steps["resume"], (std::vector<int64_t>{6}));
  EXPECT_EQ(steps["summary"], (std::vector<int64_t>{12}));
  // What the first run wrote after step 6 is kept aside, not lost.
  std::vector<int64_t> superseded;
  for (const auto& j : MetricsLines(dir + "/run/metrics.superseded.jsonl"))
    superseded.push_back(j["step"]);
  EXPECT_EQ(superseded, (std::vector<int64_t>{8, 10, 12, 12}));
}

TEST_F(TrainerTest, CpuRunLeavesTheGpuFieldsOutOfItsMetrics) {
  // No GPU (and no NVML): the train and summary records carry no gpu_* field, rather than
  // zeros that a plot would draw as an idle GPU; nothing was skipped by a loss scaler.
  const std::string dir = TempDir("no_gpu"), log = dir + "/log";
  ASSERT_EQ(RunCmd(Mmtrain() + " --shards " + kShards + "/coco --steps 4 --batch-size 8 " +
                       "--log-every 2 --out " + dir + "/run" + kSmallModel,
                   log),
            0)
      << ReadFile(log);
  int train_lines = 0;
  for (const auto& j : MetricsLines(dir + "/run/metrics.jsonl")) {
    if (j["event"] != "train" && j["event"] != "summary") continue;
    train_lines += j["event"] == "train";
    for (const char* key : {"gpu_util_pct", "gpu_mem_used_mib", "gpu_mem_total_mib"}) {
      EXPECT_FALSE(j.contains(key)) << j.dump();
    }
    EXPECT_EQ(j["skipped_steps"], 0) << j.dump();
  }
  EXPECT_EQ(train_lines, 2);
  EXPECT_FALSE(Summary(dir + "/run").contains("loss_scale"));  // fp32: no scaler
}

TEST_F(TrainerTest, PlotDrawsGpuUtilisationAndMemoryWhenTheRunHasThem) {
  // Train lines as a CUDA run writes them (NVML's fields), and the same lines without them.
  const std::string dir = TempDir("plot_gpu"), log = dir + "/log";
  for (const std::string run : {"gpu", "cpu"}) {
    ASSERT_EQ(::mkdir((dir + "/" + run).c_str(), 0755), 0);
    std::ofstream f(dir + "/" + run + "/metrics.jsonl");
    for (int step = 10; step <= 100; step += 10) {
      nlohmann::json r = {
          {"event", "train"},      {"step", step},         {"loss", 9.0 - step / 50.0},
          {"contrastive", 3.0},    {"caption", 6.0},       {"lr", 1e-3},
          {"samples_per_s", 2000}, {"data_wait_pct", 0.8}, {"loss_scale", 65536}};
      if (run == "gpu") {
        r["gpu_util_pct"] = 90 + step % 7, r["gpu_mem_used_mib"] = 30000 + 10 * step;
        r["gpu_mem_total_mib"] = 81559;
      }
      f << r.dump() << "\n";
    }
  }
  for (const std::string run : {"gpu", "cpu"}) {
    ASSERT_EQ(
        RunCmd(Mmtrain() + " plot " + dir + "/" + run + " -o " + dir + "/" + run + ".png", log), 0)
        << ReadFile(log);
  }
  const std::string gpu_png = ReadFile(dir + "/gpu.png"), cpu_png = ReadFile(dir + "/cpu.png");
  EXPECT_EQ(gpu_png.compare(1, 3, "PNG"), 0);
  EXPECT_NE(gpu_png, cpu_png) << "the GPU fields were not drawn";
}

/// The eval record of a run of 1 step at lr 0 (the initial weights) on `launch` with `flags`.
nlohmann::json EvalAtInitialWeights(const std::string& dir, const std::string& name,
                                    const std::string& launch, const std::string& flags,
                                    const std::string& val = "val") {
  const std::string log = dir + "/log";
  EXPECT_EQ(RunCmd(launch + " --shards " + kShards + "/train --val-shards " + kShards + "/" + val +
                       " --steps 1 --lr 0 --eval-every 1 --out " + dir + "/" + name + kSmall + " " +
                       flags,
                   log),
            0)
      << ReadFile(log);
  return FirstEvent(dir + "/" + name, "eval");
}

TEST_F(TrainerTest, EvaluationSplitAcrossTwoRanksEqualsOneProcess) {
  const std::string dir = TempDir("eval_split");
  for (const std::string limit : {"", " --eval-max 45"}) {
    auto one = EvalAtInitialWeights(dir, "one", Mmtrain(), "--batch-size 16" + limit);
    auto two = EvalAtInitialWeights(dir, "two", Mpirun2(), "--batch-size 8" + limit);
    SCOPED_TRACE(limit);
    ASSERT_TRUE(one.is_object() && two.is_object());
    EXPECT_EQ(one["n"], limit.empty() ? 72 : 45) << one.dump();
    EXPECT_EQ(two["n"], one["n"]);
    if (limit.empty()) {
      EXPECT_EQ(two["scored"], 72) << two.dump();  // no padding rows
    }
    for (const char* k : {"i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10"}) {
      EXPECT_EQ(two[k], one[k]) << k;
    }
    const double a = one["caption_loss"], b = two["caption_loss"];
    std::printf("eval%s: 1 process caption loss %.9f, 2 ranks %.9f, i2t R@5 %.4f / %.4f\n",
                limit.c_str(), a, b, one["i2t_r5"].get<double>(), two["i2t_r5"].get<double>());
    EXPECT_NEAR(b, a, 1e-6 * a);
    ASSERT_EQ(std::system(("rm -rf '" + dir + "/one' '" + dir + "/two'").c_str()), 0);
  }
}

// Exact evaluation: coco-cc's 51 images on 2 ranks of 8 (global batch 16)
// are scored once each, 51 rows in all (51 = 3 * 16 + 3: rank 0 batches of 8, 8, 8, 3; rank 1
// of 8, 8, 8, one fewer), where the padded split scored 64 rows (13 repeats).
// Recall's denominator N is the 51 distinct images, as before (the repeats were dropped after
// the gather); now no row is scored twice, and a repeat would be an error, not dropped.
TEST_F(TrainerTest, EvaluationOnTwoRanksScoresEachOf51ValImagesOnce) {
  const std::string dir = TempDir("eval_exact");
  auto two = EvalAtInitialWeights(dir, "two", Mpirun2(), "--batch-size 8", "coco");
  ASSERT_TRUE(two.is_object());
  EXPECT_EQ(two["n"], 51) << two.dump();
  EXPECT_EQ(two["scored"], 51) << two.dump();
  EXPECT_DOUBLE_EQ(two["chance_r1"].get<double>(), 1.0 / 51);
}

TEST_F(TrainerTest, PlotDrawsOneRunAndTwoOverlaid) {
  const std::string dir = TempDir("plot"), log = dir + "/log";
  const std::string run = Mmtrain() + " --shards " + kShards + "/train --val-shards " + kShards +
                          "/val --steps 6 --batch-size 16 --eval-every 3 --log-every 2" +
                          kSmallModel;
  ASSERT_EQ(RunCmd(run + " --out " + dir + "/a", log), 0) << ReadFile(log);
  ASSERT_EQ(RunCmd(run + " --lr 3e-3 --out " + dir + "/b", log), 0) << ReadFile(log);
  ASSERT_EQ(RunCmd(Mmtrain() + " plot " + dir + "/a -o " + dir + "/a.png", log), 0)
      << ReadFile(log);
  ASSERT_EQ(RunCmd(Mmtrain() + " plot " + dir + "/a " + dir + "/b -o " + dir + "/ab.png", log), 0)
      << ReadFile(log);
  // Real PNGs of the promised size, with drawn pixels (PIL reads them).
  const std::string check =
      "/usr/bin/python3 -c \"import sys; from PIL import Image; "
      "im = Image.open(sys.argv[1]); im.load(); "
      "print(im.format, im.size, len(im.getcolors(1 << 20) or []))\" ";
  for (const std::string png : {"a.png", "ab.png"}) {
    const std::string out = dir + "/pil_" + png;
    ASSERT_EQ(RunCmd(check + dir + "/" + png, out), 0) << ReadFile(out);
    EXPECT_EQ(ReadFile(out).rfind("PNG (1600, 900) ", 0), 0u) << ReadFile(out);
  }
  // A directory without metrics: one line, status 1.
  std::string out;
  const std::string bad = dir + "/log_bad";
  EXPECT_EQ(RunCmd(Mmtrain() + " plot " + dir + "/nope -o " + dir + "/x.png", bad), 1);
  out = ReadFile(bad);
  EXPECT_EQ(out, "mmtrain plot: error: " + dir + "/nope/metrics.jsonl: no such file (is " + dir +
                     "/nope an mmtrain --out directory?)\n");
}

// --- pieces, in process --------------------------------------------------------------------------

TEST(DistEnv, ReadsTorchrunOpenMpiAndSlurmVariables) {
  auto from = [](std::map<std::string, std::string> m) {
    return mm::train::ReadDistEnv([m](const char* n) -> const char* {
      auto it = m.find(n);
      return it == m.end() ? nullptr : it->second.c_str();
    });
  };
  auto none = from({});
  EXPECT_EQ(none.world_size, 1);
  auto t = from({{"RANK", "3"},
                 {"WORLD_SIZE", "4"},
                 {"LOCAL_RANK", "1"},
                 {"MASTER_ADDR", "10.0.0.2"},
                 {"MASTER_PORT", "1234"},
                 {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.world_size, 4);
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_EQ(t.master_addr, "10.0.0.2");
  EXPECT_EQ(t.master_port, 1234);
  EXPECT_TRUE(t.use_agent_store);
  EXPECT_EQ(t.source, "torchrun");
  auto o = from({{"OMPI_COMM_WORLD_RANK", "1"},
                 {"OMPI_COMM_WORLD_SIZE", "2"},
                 {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.source, "openmpi");
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_EQ(o.master_port, 29500);
  EXPECT_FALSE(o.use_agent_store);
  auto s = from({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}});
  EXPECT_EQ(s.rank, 5);
  EXPECT_EQ(s.world_size, 8);
  EXPECT_EQ(s.source, "slurm");
  EXPECT_EQ(s.restart_count, 0);
  auto r = from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RESTART_COUNT", "3"}});
  EXPECT_EQ(r.restart_count, 3);
  EXPECT_THROW(from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RESTART_COUNT", "-1"}}),
               std::invalid_argument);
  EXPECT_THROW(from({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), std::invalid_argument);
  EXPECT_THROW(from({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), std::invalid_argument);
}

TEST(PlanResume, TakesUnsetFlagsFromTheCheckpointAndNamesChanges) {
  using mm::train::TrainConfig;
  TrainConfig saved;
  saved.shards = "/s", saved.amp = mm::train::AmpMode::kBf16, saved.lr = 2e-3, saved.batch_size = 8;
  saved.accum_steps = 2, saved.steps = 100, saved.eval_every = 10;
  TrainConfig cli;  // defaults, nothing given but --resume and a process flag
  cli.threads = 1;
  cli.given = {"--resume", "--threads"};
  auto plan = mm::train::PlanResume(cli, saved.ToJson(), /*saved_world=*/2, /*world=*/2);
  EXPECT_EQ(plan.config.amp, mm::train::AmpMode::kBf16);
  EXPECT_EQ(plan.config.lr, 2e-3);
  EXPECT_EQ(plan.config.batch_size, 8);
  EXPECT_EQ(plan.config.steps, 100);
  EXPECT_EQ(plan.config.eval_every, 10);
  EXPECT_EQ(plan.config.threads, 1);
  EXPECT_TRUE(plan.changes.empty());
  // Another world size, no split given: the per-rank batch that keeps 8 x 2 x 2 = 32.
  plan = mm::train::PlanResume(cli, saved.ToJson(), 2, 1);
  EXPECT_EQ(plan.config.batch_size, 16);
  ASSERT_EQ(plan.changes.size(), 1u);
  EXPECT_FALSE(plan.changes[0].optimisation);
  EXPECT_THROW(mm::train::PlanResume(cli, saved.ToJson(), 2, 3), std::invalid_argument);
  // Given flags: --lr changes the optimisation, --eval-every does not.
  cli.lr = 1e-3, cli.eval_every = 5;
  cli.given = {"--lr", "--eval-every"};
  plan = mm::train::PlanResume(cli, saved.ToJson(), 2, 2);
  EXPECT_EQ(plan.config.lr, 1e-3);
  EXPECT_EQ(plan.config.amp, mm::train::AmpMode::kBf16);
  ASSERT_EQ(plan.changes.size(), 2u);
  EXPECT_EQ(mm::train::DescribeRefused(plan.changes), "--lr 0.001 (checkpoint: 0.002)");
  // The same value given again is no change.
  cli.lr = 2e-3;
  plan = mm::train::PlanResume(cli, saved.ToJson(), 2, 2);
  EXPECT_EQ(mm::train::DescribeRefused(plan.changes), "");
}

TEST(PlanResume, RefusesModelScheduleAndAGlobalBatchThatAnotherWorldSizeChanges) {
  using mm::train::TrainConfig;
  TrainConfig saved;
  saved.shards = "/s", saved.batch_size = 8, saved.accum_steps = 2, saved.dim = 64;
  saved.warmup = 5;
  TrainConfig cli = saved;
  // An explicit split on another world size that keeps 8 x 2 x 2 = 32: taken, not refused.
  cli.batch_size = 4, cli.accum_steps = 8;
  cli.given = {"--resume", "--batch-size", "--accum-steps"};
  auto plan = mm::train::PlanResume(cli, saved.ToJson(), /*saved_world=*/2, /*world=*/1);
  EXPECT_EQ(mm::train::DescribeRefused(plan.changes), "");
  // The same --batch-size given on 1 rank instead of 2: the global batch halves, refused.
  cli.batch_size = 8, cli.accum_steps = 2;
  cli.given = {"--resume", "--batch-size"};
  plan = mm::train::PlanResume(cli, saved.ToJson(), 2, 1);
  EXPECT_EQ(mm::train::DescribeRefused(plan.changes),
            "global batch (--batch-size x --accum-steps x ranks) 16 (checkpoint: 32)");
  // The model and the LR schedule.
  cli = saved;
  cli.dim = 128, cli.warmup = 0;
  cli.given = {"--resume", "--dim", "--warmup"};
  plan = mm::train::PlanResume(cli, saved.ToJson(), 1, 1);
  EXPECT_EQ(mm::train::DescribeRefused(plan.changes),
            "--dim 128 (checkpoint: 64), --warmup 0 (checkpoint: 5)");
}

TEST(CaptionLoss, IgnoresPaddingAndItsLength) {
  torch::manual_seed(0);
  const int64_t v = 50;
  auto tokens = torch::randint(1, v, {3, 6}, torch::kLong);
  auto lengths = torch::tensor({6, 3, 1}, torch::kLong);
  auto logits = torch::randn({3, 6, v});
  auto a = mm::train::CaptionLossSum(logits, tokens, lengths);
  // The same rows padded to 9 with other garbage in the padding: the same loss.
  auto tokens9 = torch::cat({tokens, torch::zeros({3, 3}, torch::kLong)}, 1);
  tokens9.index_put_({1, torch::indexing::Slice(3, 9)}, 7);
  auto logits9 = torch::cat({logits, torch::randn({3, 3, v})}, 1);
  logits9.index_put_({1, torch::indexing::Slice(3, 9)}, torch::randn({6, v}));
  auto b = mm::train::CaptionLossSum(logits9, tokens9, lengths);
  EXPECT_NEAR(a.item<double>(), b.item<double>(), 1e-5);
  EXPECT_EQ(mm::train::CaptionTokenCount(lengths), 5 + 2 + 0);
  // By hand: row 1 predicts tokens[1][1] and tokens[1][2] from positions 0 and 1.
  auto lp = torch::log_softmax(logits, -1);
  double expect = 0;
  for (int t = 0; t < 5; ++t) expect -= lp[0][t][tokens[0][t + 1].item<int64_t>()].item<double>();
  for (int t = 0; t < 2; ++t) expect -= lp[1][t][tokens[1][t + 1].item<int64_t>()].item<double>();
  EXPECT_NEAR(a.item<double>(), expect, 1e-4);
}

TEST(CocaModel, CausalTextDoesNotSeeLaterTokens) {
  torch::manual_seed(0);
  mm::train::ModelConfig c;
  c.dim = 32, c.layers = 1, c.heads = 2, c.patch = 16, c.image_size = 32, c.vocab_size = 40,
  c.max_tokens = 8, c.embed_dim = 16;
  mm::train::Coca model(c);
  auto images = torch::randn({2, 3, 32, 32});
  auto tokens = torch::randint(1, 40, {2, 8}, torch::kLong);
  auto lengths = torch::tensor({8, 8}, torch::kLong);
  auto out1 = model->forward(images, tokens, lengths);
  auto tokens2 = tokens.clone();
  tokens2.index_put_({torch::indexing::Slice(), 5}, 3);  // change position 5 only
  auto out2 = model->forward(images, tokens2, lengths);
  EXPECT_TRUE(torch::allclose(out1.logits.slice(1, 0, 5), out2.logits.slice(1, 0, 5), 1e-5, 1e-6));
  EXPECT_FALSE(torch::allclose(out1.logits.slice(1, 5, 8), out2.logits.slice(1, 5, 8)));
  // The image reaches the text only through cross-attention: other images, other logits.
  auto out3 = model->forward(torch::randn({2, 3, 32, 32}), tokens, lengths);
  EXPECT_FALSE(torch::allclose(out1.logits, out3.logits));
  EXPECT_EQ(out1.logits.sizes(), (std::vector<int64_t>{2, 8, 40}));
}

}  // namespace
