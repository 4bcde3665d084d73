// Tests of text/tokenizer.h: SentencePiece encoding against Debian's Python
// sentencepiece, bos/eos and truncation, deterministic training.
#include "text/tokenizer.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "ingest/ingest.h"
#include "mm/internal/checksum.h"
#include "pack_test_util.h"

namespace mm::pack {
namespace {

namespace fs = std::filesystem;

// ids as Debian's Python sentencepiece gives them, one line of space-separated ids a caption.
std::vector<std::vector<int32_t>> PythonIds(const std::string& model,
                                            const std::vector<std::string>& captions) {
  TempDir tmp;
  std::string joined;
  for (const auto& c : captions) joined += c + '\0';
  WriteBytes(tmp / "captions.bin", joined);
  int rc = 0;
  std::string out = RunPython(R"(
import sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=)" +
                                  Py(model) + R"()
data = open()" + Py(tmp / "captions.bin") +
                                  R"(, 'rb').read().split(b'\0')[:-1]
for c in data:
    print(' '.join(str(i) for i in sp.encode(c.decode('utf-8'))))
print('bos', sp.bos_id(), 'eos', sp.eos_id())
)",
                              &rc);
  EXPECT_EQ(rc, 0) << out;
  std::vector<std::vector<int32_t>> ids;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("bos", 0) == 0) break;
    std::istringstream words(line);
    std::vector<int32_t> row;
    int32_t id;
    while (words >> id) row.push_back(id);
    ids.push_back(row);
  }
  return ids;
}

const std::vector<std::string> kCaptions = {
    "a family is sitting down at a table to have cake",
    "Group around a table waiting for a birthday cake to be served.",
    "一只猫坐在窗台上，看着外面的雨。",
    "🐱🏠 a cat at home 👩‍👩‍👧 with family 🇯🇵",
    "cafe\u0301 (NFD) and caf\u00e9 (NFC)",
    "  leading and trailing spaces  ",
};

TEST(Tokenizer, AlbertIdsMatchPythonSentencepiece) {
  auto tok = Tokenizer::FromFile(AlbertModel());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  // ALBERT's model defines no bos/eos control pieces: ids are exactly sentencepiece's.
  EXPECT_EQ((*tok)->bos_id(), -1);
  EXPECT_EQ((*tok)->eos_id(), -1);
  EXPECT_EQ((*tok)->pad_id(), 0);
  EXPECT_EQ((*tok)->vocab_size(), 30000);
  auto want = PythonIds(AlbertModel(), kCaptions);
  ASSERT_EQ(want.size(), kCaptions.size());
  for (size_t i = 0; i < kCaptions.size(); ++i) {
    auto got = (*tok)->Encode(kCaptions[i], 1000);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->ids, want[i]) << kCaptions[i];
    EXPECT_FALSE(got->truncated);
  }
  // Truncation without eos: the first max_tokens ids.
  auto cut = (*tok)->Encode(kCaptions[1], 5);
  ASSERT_TRUE(cut.ok());
  EXPECT_TRUE(cut->truncated);
  EXPECT_EQ(cut->ids, std::vector<int32_t>(want[1].begin(), want[1].begin() + 5));
}

TEST(Tokenizer, TrainedModelHasBosEosAndTruncationKeepsEos) {
  std::vector<std::string> captions;
  std::istringstream manifest(testing::ReadBytes(DataDir() / "coco-cc" / "captions.jsonl"));
  // The coco-cc captions: 255 lines of real text.
  auto ingest = Ingest((DataDir() / "coco-cc" / "captions.jsonl").string(), InputFormat::kJsonl);
  ASSERT_TRUE(ingest.ok());
  std::vector<std::string_view> views;
  for (const auto& s : ingest->samples) {
    for (const auto& c : s.captions) views.push_back(c);
  }
  ASSERT_EQ(views.size(), 255u);
  std::string note;
  auto model = Tokenizer::Train(views, 8000, &note);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_FALSE(note.empty()) << "255 captions cannot fill 8000 pieces: the note says so";
  // Deterministic: the same captions give the same model bytes.
  std::string note2;
  auto again = Tokenizer::Train(views, 8000, &note2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Sha256Hex(*model), Sha256Hex(*again));

  auto tok = Tokenizer::FromSerialized(*model);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ((*tok)->pad_id(), 0);
  EXPECT_EQ((*tok)->unk_id(), 1);
  EXPECT_EQ((*tok)->bos_id(), 2);
  EXPECT_EQ((*tok)->eos_id(), 3);
  EXPECT_LT((*tok)->vocab_size(), 8000);
  EXPECT_GT((*tok)->vocab_size(), 100);

  TempDir tmp;
  WriteBytes(tmp / "trained.model", *model);
  std::vector<std::string> few = {std::string(views[0]), std::string(views[7]), kCaptions[2]};
  auto want = PythonIds((tmp / "trained.model").string(), few);
  ASSERT_EQ(want.size(), few.size());
  for (size_t i = 0; i < few.size(); ++i) {
    auto got = (*tok)->Encode(few[i], 77);
    ASSERT_TRUE(got.ok());
    std::vector<int32_t> expect = {2};
    expect.insert(expect.end(), want[i].begin(), want[i].end());
    expect.push_back(3);
    EXPECT_EQ(got->ids, expect) << few[i];
  }
  // max_tokens 4: bos, two pieces, eos.
  auto cut = (*tok)->Encode(few[0], 4);
  ASSERT_TRUE(cut.ok());
  EXPECT_TRUE(cut->truncated);
  ASSERT_EQ(cut->ids.size(), 4u);
  EXPECT_EQ(cut->ids.front(), 2);
  EXPECT_EQ(cut->ids.back(), 3);
  EXPECT_EQ(cut->ids[1], want[0][0]);
  EXPECT_EQ(cut->ids[2], want[0][1]);
}

TEST(Tokenizer, RejectsAFileThatIsNotAModel) {
  TempDir tmp;
  WriteBytes(tmp / "x.model", "not a model");
  auto tok = Tokenizer::FromFile((tmp / "x.model").string());
  EXPECT_FALSE(tok.ok());
  EXPECT_FALSE(Tokenizer::FromFile((tmp / "missing.model").string()).ok());
}

}  // namespace
}  // namespace mm::pack
