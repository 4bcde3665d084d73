// Tests of what `mmpack build` may replace and how (commands/set_publish.h, issue 9 item 4) and
// of the build lock on OUT (commands/set_lock.h, issue 9 item 5), on sets built from the real
// skimage-micro data.
#include "set/set_publish.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "commands/commands.h"
#include "set/output_dir.h"
#include "set/set_lock.h"
#include "pack_test_util.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

BuildOptions Build(const fs::path& out, bool overwrite) {
  BuildOptions o;
  o.input = (DataDir() / "skimage-micro" / "captions.jsonl").string();
  o.output = out.string();
  o.tokenizer = AlbertModel();
  o.threads = 2;
  o.quiet = true;
  o.overwrite = overwrite;
  return o;
}

TEST(SetPublish, OverwriteRefusesAFolderThatOnlyLooksLikeASet) {
  TempDir tmp;
  // Files with the set's names, but no valid index.json: someone's data.
  const fs::path out = tmp / "lookalike";
  fs::create_directories(out);
  WriteBytes(out / "index.json", "{\"notes\": true}");
  WriteBytes(out / "shard-000000.h5", "my thesis");
  Status st = RunBuild(Build(out, /*overwrite=*/true));
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists) << st.ToString();
  EXPECT_NE(st.message().find("not an mmpack shard set"), std::string::npos) << st.ToString();
  EXPECT_EQ(ReadBytes(out / "shard-000000.h5"), "my thesis");
  // report.json alone used to be enough, too.
  const fs::path report_only = tmp / "report_only";
  fs::create_directories(report_only);
  WriteBytes(report_only / "report.json", "{}");
  EXPECT_EQ(RunBuild(Build(report_only, true)).code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(fs::exists(report_only / "report.json"));
}

TEST(SetPublish, AKillBetweenTheRenamesIsRecoveredByTheNextBuild) {
  TempDir tmp;
  const fs::path out = tmp / "out";
  ASSERT_TRUE(RunBuild(Build(out, false)).ok());
  const std::string index = ReadBytes(out / "index.json");
  // What a kill after "OUT aside" and before "new set in" leaves: OUT missing, the old set
  // aside. Without recovery the next build published over it and the old set was stranded.
  fs::rename(out, tmp / "out.mmpack-old");
  Status st = RunBuild(Build(out, /*overwrite=*/false));
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists) << st.ToString();  // the old set is back
  EXPECT_EQ(ReadBytes(out / "index.json"), index);
  EXPECT_FALSE(fs::exists(tmp / "out.mmpack-old"));

  // A kill after "new set in", before the old one was deleted: the next build deletes it.
  fs::create_directories(tmp / "out.mmpack-old");
  fs::copy(out, tmp / "out.mmpack-old");
  ASSERT_TRUE(RunBuild(Build(out, /*overwrite=*/true)).ok());
  EXPECT_FALSE(fs::exists(tmp / "out.mmpack-old"));
  EXPECT_FALSE(fs::exists(tmp / "out.mmpack-partial"));
  EXPECT_FALSE(fs::exists(tmp / "out.mmpack-lock"));
  EXPECT_TRUE(fs::exists(out / "index.json"));
}

TEST(SetLock, ASecondBuildFailsAtOnceAndADeadHolderReleasesIt) {
  TempDir tmp;
  const fs::path out = NormalOutput((tmp / "out").string());
  {
    Result<SetLock> held = LockOutput(out);  // a build in progress
    ASSERT_TRUE(held.ok()) << held.status().ToString();
    Status st = RunBuild(Build(out, false));
    EXPECT_EQ(st.code(), StatusCode::kAlreadyExists) << st.ToString();
    EXPECT_NE(st.message().find("another mmpack build (pid " + std::to_string(::getpid())),
              std::string::npos)
        << st.ToString();
    EXPECT_EQ(st.message().find('\n'), std::string::npos);  // one line
    EXPECT_FALSE(fs::exists(out));
  }
  // A holder killed with its lock: the kernel releases it.
  const pid_t child = ::fork();
  if (child == 0) {
    Result<SetLock> held = LockOutput(out);
    ::_exit(held.ok() ? 0 : 1);  // no destructor: the file stays, the lock dies with us
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  Status st = RunBuild(Build(out, false));
  EXPECT_TRUE(st.ok()) << st.ToString();
}

}  // namespace
}  // namespace mm::pack
