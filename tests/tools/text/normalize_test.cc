// Tests of text/normalize.h: NFKC and lowercasing before tokenizing, checked against Python's
// unicodedata.normalize("NFKC", s) and str.lower() (full Unicode case mapping, final sigma).
#include "text/normalize.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "pack_test_util.h"

namespace mm::pack {
namespace {

const std::vector<std::string> kSamples = {
    "A Man riding a WAVE on top of a surfboard.",
    "\xEF\xBC\xA6\xEF\xBD\x95\xEF\xBD\x8C\xEF\xBD\x8C width",  // "Ｆｕｌｌ width"
    "\xEF\xAC\x81sh \xE2\x91\xA0 caf\x65\xCC\x81",  // "ﬁsh ① café" (combining acute)
    "\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3",             // "ΟΔΟΣ": final sigma
    "Stra\xC3\x9F\x65 \xC3\x84RGER",                // "Straße ÄRGER"
    "\xE6\x9D\xB1\xE4\xBA\xAC\xE3\x82\xBF\xEF\xBE\x9E\xEF\xBD\xB0",  // 東京 + half-width kana
    "plain ascii, nothing to do",
};

// Python's answer for each sample: NFKC when `nfkc`, then lower() when `lower`.
std::vector<std::string> PythonNormalize(bool nfkc, bool lower) {
  TempDir tmp;
  std::string joined;
  for (const auto& s : kSamples) joined += s + '\n';
  WriteBytes(tmp / "in.txt", joined);
  int rc = 0;
  std::string out =
      RunPython(std::string("import unicodedata, sys\n") + "for line in open(" +
                    Py(tmp / "in.txt") + ", encoding='utf-8').read().split('\\n')[:-1]:\n" +
                    (nfkc ? "    line = unicodedata.normalize('NFKC', line)\n" : "") +
                    (lower ? "    line = line.lower()\n" : "") +
                    "    sys.stdout.buffer.write(line.encode('utf-8') + b'\\n')\n",
                &rc);
  EXPECT_EQ(rc, 0) << out;
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void ExpectLikePython(const TextOptions& o) {
  const auto want = PythonNormalize(o.normalize == TextNormalization::kNfkc, o.lowercase);
  ASSERT_EQ(want.size(), kSamples.size());
  for (size_t i = 0; i < kSamples.size(); ++i) {
    auto got = NormalizeForTokenizer(kSamples[i], o);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, want[i]) << "sample " << i << ": " << kSamples[i];
  }
}

TEST(Normalize, LowercaseMatchesPython) { ExpectLikePython({true, TextNormalization::kNone}); }
TEST(Normalize, NfkcMatchesPython) { ExpectLikePython({false, TextNormalization::kNfkc}); }
TEST(Normalize, NfkcThenLowercaseMatchesPython) {
  ExpectLikePython({true, TextNormalization::kNfkc});
}

TEST(Normalize, IdentityKeepsBytes) {
  const std::string s = "Caf\x65\xCC\x81 \xEF\xBC\xA6";
  auto got = NormalizeForTokenizer(s, TextOptions{});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, s);
}

TEST(Normalize, NamesRoundTrip) {
  EXPECT_EQ(ParseTextNormalization("nfkc"), TextNormalization::kNfkc);
  EXPECT_EQ(ParseTextNormalization("none"), TextNormalization::kNone);
  EXPECT_FALSE(ParseTextNormalization("NFKC").has_value());
  EXPECT_FALSE(ParseTextNormalization("nfc").has_value());
}

}  // namespace
}  // namespace mm::pack
