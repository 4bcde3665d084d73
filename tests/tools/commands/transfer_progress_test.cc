// Tests of the progress lines of upload, verify, info and bench (commands/transfer_progress.h):
// the line's text for given figures, and the lines written to a stream that is not a terminal.
#include "commands/transfer_progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>

namespace mm::pack {
namespace {

TEST(TransferProgress, LineSaysBytesShareRateAndEta) {
  const std::string line = TransferProgress::Line(250'000'000, 1'000'000'000, 50'000'000, 15);
  EXPECT_EQ(line.find("of"), line.find(" of ") + 1) << line;
  EXPECT_NE(line.find("(25.0%)"), std::string::npos) << line;
  EXPECT_NE(line.find("/s, ETA 0:15"), std::string::npos) << line;
  EXPECT_NE(TransferProgress::Line(1, 2, 0, 3725).find("ETA 1:02:05"), std::string::npos);
  EXPECT_NE(TransferProgress::Line(1, 2, 0, -1).find("ETA ?"), std::string::npos);
  // Without a total (info): bytes and rate only.
  const std::string open = TransferProgress::Line(1000, 0, 10, -1);
  EXPECT_EQ(open.find(" of "), std::string::npos) << open;
  EXPECT_EQ(open.find("ETA"), std::string::npos) << open;
}

// A pipe (here a temporary file: not a terminal) gets whole lines every `every_s`, none after
// Finish, and no carriage return.
TEST(TransferProgress, APipeGetsALineEveryPeriodAndNoneAfterFinish) {
  std::FILE* stream = std::tmpfile();
  ASSERT_NE(stream, nullptr);
  std::atomic<int64_t> done{0};
  ProgressOptions options;
  options.every_s = 0.1;
  {
    TransferProgress bar(
        "upload", [&done] { return done.load(); }, 1000, options, stream);
    // Until two lines are out (one line is under 60 bytes), however slowly a loaded machine
    // schedules the progress thread; no figure of time is asserted.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::ftell(stream) < 60 && std::chrono::steady_clock::now() < give_up) {
      if (done.load() < 950) done += 50;
      std::this_thread::sleep_for(std::chrono::milliseconds(60));
    }
    bar.Finish();
    const long size = std::ftell(stream);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    EXPECT_EQ(std::ftell(stream), size);  // nothing after Finish
  }
  std::rewind(stream);
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, stream)) > 0;) text.append(buffer, n);
  std::fclose(stream);
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  const std::regex line(R"(upload: [0-9.]+ [kKMG]?B of [0-9.]+ [kKMG]?B \([0-9.]+%\), [0-9.]+ )"
                        R"([kKMG]?B/s, ETA ([0-9]+:[0-9]{2}|\?)\n)");
  int lines = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator();
       ++it) {
    ++lines;
  }
  EXPECT_GE(lines, 2) << text;
  EXPECT_EQ(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')),
            static_cast<size_t>(lines))
      << text;
  // Disabled: no thread, no line.
  std::FILE* quiet = std::tmpfile();
  options.enabled = false;
  {
    TransferProgress bar(
        "verify", [] { return int64_t{5}; }, 10, options, quiet);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_EQ(std::ftell(quiet), 0);
  std::fclose(quiet);
}

}  // namespace
}  // namespace mm::pack
