// The shared file primitives (mm/internal/file.h, mm/internal/checksum.h): errno to Status,
// the open that never blocks and refuses what is not a regular file, the bounded whole-file
// read, and the digests of files.
#include "mm/internal/file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "mm/internal/checksum.h"
#include "shard_fixture.h"

namespace mm {
namespace {

using mm::testing::TempDir;
using mm::testing::WriteFile;

TEST(ErrnoStatus, MissingIsNotFoundAndTheRestIOError) {
  Status missing = ErrnoStatus(ENOENT, "cannot open /x");
  EXPECT_TRUE(missing.IsNotFound());
  EXPECT_EQ(missing.message(), "cannot open /x: No such file or directory");
  EXPECT_TRUE(ErrnoStatus(ENOTDIR, "x").IsNotFound());
  EXPECT_EQ(ErrnoStatus(EACCES, "x").code(), StatusCode::kIOError);
}

TEST(OpenRegularFile, RefusesAFifoAtOnceInsteadOfWaitingForAWriter) {
  TempDir tmp;
  const std::string fifo = tmp / "index.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto file = OpenRegularFile(fifo);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message(),
            "cannot read " + fifo + ": not a regular file (FIFO, device or socket)");
  std::string bytes;
  EXPECT_EQ(ReadRegularFile(fifo, &bytes).code(), StatusCode::kIOError);
}

TEST(OpenRegularFile, RefusesADeviceADirectoryAndNamesAMissingFile) {
  TempDir tmp;
  EXPECT_FALSE(OpenRegularFile("/dev/zero").ok());
  auto dir = OpenRegularFile(tmp.path());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().message(), "cannot read " + tmp.path() + ": Is a directory");
  auto missing = OpenRegularFile(tmp / "nope.jpg");
  ASSERT_TRUE(missing.status().IsNotFound());
  EXPECT_EQ(missing.status().message(), "no such file: " + tmp / "nope.jpg");
  EXPECT_TRUE(OpenRegularFile(tmp / "nope/deeper.jpg").status().IsNotFound());  // ENOTDIR
}

TEST(ReadRegularFile, ReadsTheWholeFileAndRefusesOneOverTheLimitBeforeReading) {
  TempDir tmp;
  const std::string path = tmp / "a.txt";
  std::string text(200000, 'x');  // several read blocks
  text[123456] = 'y';
  WriteFile(path, text);
  std::string bytes;
  ASSERT_TRUE(ReadRegularFile(path, &bytes).ok());
  EXPECT_EQ(bytes, text);
  ASSERT_TRUE(ReadRegularFile(path, &bytes, 200000).ok());
  Status over = ReadRegularFile(path, &bytes, 199999);
  EXPECT_EQ(over.code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(bytes.empty());
  // A 50 GB sparse file: refused from its size, nothing read.
  const std::string sparse = tmp / "sparse.txt";
  {
    int fd = ::open(sparse.c_str(), O_WRONLY | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, int64_t{50} << 30), 0);
    ::close(fd);
  }
  EXPECT_EQ(ReadRegularFile(sparse, &bytes, int64_t{16} << 20).code(), StatusCode::kOutOfRange);
}

TEST(Checksum, Xxh3AndSha256OfBytesAndOfFilesAgree) {
  EXPECT_EQ(Xxh3Hex("", 0), "2d06800538d394c2");  // XXH3-64 of nothing, seed 0
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  TempDir tmp;
  std::string text;
  for (int i = 0; i < 300000; ++i) text.push_back(static_cast<char>(i * 7 + i / 251));
  WriteFile(tmp / "f.bin", text);
  auto xxh = Xxh3HexOfFile(tmp / "f.bin");
  ASSERT_TRUE(xxh.ok()) << xxh.status().ToString();
  EXPECT_EQ(*xxh, Xxh3Hex(text.data(), text.size()));
  auto sha = Sha256HexOfFile(tmp / "f.bin");
  ASSERT_TRUE(sha.ok()) << sha.status().ToString();
  EXPECT_EQ(*sha, Sha256Hex(text));
  EXPECT_TRUE(Sha256HexOfFile(tmp / "missing").status().IsNotFound());
  EXPECT_FALSE(Xxh3HexOfFile("/dev/zero").ok());  // never an endless read
}

}  // namespace
}  // namespace mm
