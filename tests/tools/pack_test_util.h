// pack_test_util.h: small helpers shared by the mm_pack tests (temp folders, the real data,
// running Debian's Python for reference results). They live in mm::pack::testing and are
// declared into mm::pack at the end, where every mm_pack test is written, so that a test file
// needs no using-list of its own.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace mm::pack::testing {

namespace fs = std::filesystem;

/// ../shared (real data and tokenizers): $MM_SHARED_DIR, else the configured path.
inline fs::path SharedDir() {
  const char* env = std::getenv("MM_SHARED_DIR");
  return fs::path(env != nullptr && *env ? env : MM_SHARED_DIR);
}
inline fs::path DataDir() { return SharedDir() / "data"; }
inline std::string AlbertModel() {
  return (SharedDir() / "tokenizers" / "albert-30k-clean.model").string();
}

/// A fresh folder under the system temp folder, removed with its contents at the end.
class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "mmpack-test-XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr) std::abort();
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  /// The subfolder `name`, created.
  fs::path Sub(const std::string& name) const {
    fs::create_directories(path_ / name);
    return path_ / name;
  }

 private:
  fs::path path_;
};

inline std::string ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteBytes(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Runs `script` with Debian's /usr/bin/python3 (which has PIL, numpy, sentencepiece, h5py)
/// and returns its stdout; *rc gets the exit status.
inline std::string RunPython(const std::string& script, int* rc = nullptr) {
  TempDir dir;
  fs::path file = dir / "script.py";
  WriteBytes(file, script);
  std::string cmd = "/usr/bin/python3 " + file.string();
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), &pclose);
  std::string out;
  if (!pipe) {
    if (rc) *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe.get())) > 0) out.append(buf, n);
  int status = pclose(pipe.release());
  if (rc) *rc = status;
  return out;
}

/// Quotes a path as a Python string literal.
inline std::string Py(const fs::path& p) {
  std::string s = "'";
  for (char c : p.string()) {
    if (c == '\'' || c == '\\') s.push_back('\\');
    s.push_back(c);
  }
  return s + "'";
}

}  // namespace mm::pack::testing

namespace mm::pack {

using testing::AlbertModel;
using testing::DataDir;
using testing::Py;
using testing::ReadBytes;
using testing::RunPython;
using testing::SharedDir;
using testing::TempDir;
using testing::WriteBytes;

}  // namespace mm::pack
