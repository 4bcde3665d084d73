// Tests of `mmpack info` (commands/info.cc) and `mmpack env` (commands/env.cc).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "shard/shard_test_util.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class InfoTest : public WrittenSetTest {};

TEST_F(InfoTest, PrintsTheSetsFigures) {
  std::ostringstream out;
  Status st = RunInfo(options_.output_dir, out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::string text = out.str();
  EXPECT_NE(text.find("samples:      5 in 2 shards"), std::string::npos) << text;
  EXPECT_NE(text.find("40x32x3"), std::string::npos) << text;
  EXPECT_NE(text.find("zstd level 3"), std::string::npos) << text;
  EXPECT_NE(text.find("sha256 fefb02b6"), std::string::npos) << text;
  EXPECT_NE(text.find("corrupt_image 1"), std::string::npos) << text;
  EXPECT_NE(text.find("vocab 30000"), std::string::npos) << text;
}

TEST(Info, FailsClearlyWithoutAnIndex) {
  TempDir tmp;
  std::ostringstream out;
  EXPECT_TRUE(RunInfo(tmp.path().string(), out).IsNotFound());
  EXPECT_TRUE(RunVerify(tmp.path().string(), out).IsNotFound());
}

TEST(Env, PointsHdf5PluginPathAtTheBuiltPlugin) {
  // The test binary lies in BUILD/bin like mmpack: the plugin is found beside it.
  mm::Result<std::string> env = EnvScript();
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  std::string script = *env;
  EXPECT_NE(script.find(std::string("export HDF5_PLUGIN_PATH='") + MM_PLUGIN_DIR + "'"),
            std::string::npos)
      << script;
  EXPECT_TRUE(fs::exists(fs::path(MM_PLUGIN_DIR) / "libh5z_zstd.so"));
  // The lines work in a shell: h5dump then decodes a zstd chunk.
  TempDir tmp;
  WriterOptions o = Options(tmp.path());
  auto entries = WriteSet(o, {MakePlain(0)});
  ASSERT_EQ(entries.size(), 1u);
  std::ofstream(tmp.path() / "env.sh") << script;
  int rc = 0;
  std::string out = RunCommand(
      "env -u HDF5_PLUGIN_PATH sh -c '. \"$0\" && h5dump -d images -s "
      "0,0,0,0 -c 1,1,1,3 \"$1\"' '" +
          (tmp.path() / "env.sh").string() + "' '" + (tmp.path() / entries[0].file).string() + "'",
      &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("(0,0,0,0): "), std::string::npos) << out;
}

}  // namespace
}  // namespace mm::pack
