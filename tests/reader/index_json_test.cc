// index.json encoded and decoded in one place (mm/internal/index_json.h): what the writer
// encodes the strict decoder reads back, field for field and byte for byte; and reading a
// set's index never blocks on a FIFO.
#include "mm/internal/index_json.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <string>

#include "mm/internal/set_rules.h"
#include "mm/reader.h"
#include "shard_fixture.h"

namespace mm::reader::internal {
namespace {

using mm::testing::TempDir;

IndexDocument Example() {
  IndexDocument doc;
  SetInfo& info = doc.info;
  info.image_height = 32;
  info.image_width = 40;
  info.resize_mode = mm::format::ResizeMode::kPad;
  info.compression = mm::format::Codec::kZstd;
  info.compression_level = -1;
  info.vocab_size = 8000;
  info.pad_id = 0;
  info.unk_id = 1;
  info.bos_id = 2;
  info.eos_id = 3;
  info.max_tokens = 77;
  info.tokenizer_sha256 = std::string(64, 'a');
  info.shards = {{"shard-000000.h5", 3, 7, 40, 20000, "0123456789abcdef"},
                 {"shard-000001.h5", 2, 2, 9, 15000, "fedcba9876543210"}};
  doc.background = "#808080";
  doc.tokenizer_trained = true;
  doc.build_options = {{"input_format", "jsonl"}, {"max_pixels", 89478485}};
  doc.dropped_by_reason = {{"corrupt_image", 2}, {"empty_caption", 1}};
  return doc;
}

TEST(IndexJson, DecodesWhatItEncodesAndEncodesItAgainByteForByte) {
  const std::string text = EncodeIndex(Example());
  auto doc = DecodeIndex(text, "/sets/a");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  const SetInfo& info = doc->info;
  EXPECT_EQ(info.root, "/sets/a");
  EXPECT_EQ(info.format_version, mm::format::FormatVersionFor(mm::format::ImageCodec::kRaw));
  EXPECT_EQ(info.image_height, 32);
  EXPECT_EQ(info.image_width, 40);
  EXPECT_EQ(info.resize_mode, mm::format::ResizeMode::kPad);
  EXPECT_EQ(info.compression, mm::format::Codec::kZstd);
  EXPECT_EQ(info.image_codec, mm::format::ImageCodec::kRaw);
  EXPECT_EQ(info.compression_level, -1);
  EXPECT_EQ(info.bos_id, 2);
  EXPECT_EQ(info.eos_id, 3);
  ASSERT_EQ(info.shards.size(), 2u);
  EXPECT_EQ(info.shards[1].xxh3_64, "fedcba9876543210");
  EXPECT_EQ(info.num_samples, 5);
  EXPECT_EQ(info.num_captions, 9);
  EXPECT_EQ(doc->created_by, "mmpack " + std::string(mm::kVersion));
  EXPECT_EQ(doc->background, "#808080");
  EXPECT_EQ(doc->hdf5_filter_id, mm::format::kZstdFilterId);
  EXPECT_EQ(doc->tokenizer_file, std::string(mm::format::kTokenizerFile));
  EXPECT_TRUE(doc->tokenizer_trained);
  EXPECT_EQ(doc->totals.tokens, 49);
  EXPECT_EQ(doc->totals.bytes, 35000);
  EXPECT_EQ(doc->dropped_total, 3);
  EXPECT_EQ(doc->dropped_by_reason.at("corrupt_image"), 2);
  // build_options keep their values (decoded key order aside), so encoding again is stable.
  doc->build_options = Example().build_options;
  EXPECT_EQ(EncodeIndex(*doc), text);
}

TEST(IndexJson, UncompressedSetsStoreNoFilter) {
  IndexDocument doc = Example();
  doc.info.compression = mm::format::Codec::kNone;
  auto back = DecodeIndex(EncodeIndex(doc), "/x");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->info.compression, mm::format::Codec::kNone);
  EXPECT_EQ(back->info.compression_level, 0);
  EXPECT_EQ(back->hdf5_filter_id, 0);
}

TEST(IndexJson, RefusesTotalsThatDisagreeWithTheShards) {
  nlohmann::json j = nlohmann::json::parse(EncodeIndex(Example()));
  j["totals"]["captions"] = 8;
  auto r = DecodeIndex(j.dump(), "/x");
  ASSERT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("totals.captions = 8"), std::string::npos);
}

TEST(IndexJson, TokenizerKindRoundTripsAndIsSentencePieceWhenAbsent) {
  IndexDocument doc = Example();
  doc.tokenizer_kind = mm::format::TokenizerKind::kClipBpe;
  doc.tokenizer_file = "bpe_simple_vocab.txt.gz";
  auto back = DecodeIndex(EncodeIndex(doc), "/x");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->tokenizer_kind, mm::format::TokenizerKind::kClipBpe);
  EXPECT_EQ(back->tokenizer_file, "bpe_simple_vocab.txt.gz");

  nlohmann::json j = nlohmann::json::parse(EncodeIndex(Example()));
  j["tokenizer"].erase("kind");  // an index written before tokenizer.kind existed
  auto old = DecodeIndex(j.dump(), "/x");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->tokenizer_kind, mm::format::TokenizerKind::kSentencePiece);

  j["tokenizer"]["kind"] = "wordpiece-v9";
  auto unknown = DecodeIndex(j.dump(), "/x");
  EXPECT_EQ(unknown.status().code(), mm::StatusCode::kUnsupported);
  EXPECT_NE(unknown.status().message().find("wordpiece-v9"), std::string::npos);
}

// image.resize_mode is optional in format 1: a raw set naming none, or one this reader does not
// know, still opens; what the file says is kept for `mmpack info` and `verify` and written back
// unchanged. A jpeg set's mode must be known, and the error quotes it.
TEST(IndexJson, KeepsAResizeModeItDoesNotKnowInARawSetAndRefusesItInAJpegSet) {
  nlohmann::json j = nlohmann::json::parse(EncodeIndex(Example()));
  for (const char* mode : {"squash", ""}) {
    if (*mode) {
      j["image"]["resize_mode"] = mode;
    } else {
      j["image"].erase("resize_mode");
    }
    auto doc = DecodeIndex(j.dump(), "/x");
    ASSERT_TRUE(doc.ok()) << doc.status().ToString();
    EXPECT_FALSE(doc->info.resize_mode.has_value()) << mode;
    EXPECT_EQ(ResizeModeText(*doc), mode);
    EXPECT_TRUE(mm::reader::CheckSetRules(*doc).ok()) << mode;
    auto again = DecodeIndex(EncodeIndex(*doc), "/x");
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(ResizeModeText(*again), mode);
  }
  j["image"]["resize_mode"] = "squash";
  j["format_version"] = 2;
  j["image"]["codec"] = "jpeg";
  j["image"]["quality"] = 90;
  j["compression"] = {{"codec", "none"}, {"level", 0}, {"hdf5_filter_id", 0}};
  auto jpeg = DecodeIndex(j.dump(), "/x");
  ASSERT_TRUE(jpeg.ok()) << jpeg.status().ToString();
  EXPECT_EQ(jpeg->info.image_codec, mm::format::ImageCodec::kJpeg);
  const Status st = mm::reader::CheckSetRules(*jpeg);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_EQ(st.message(), "index.json: resize_mode \"squash\"");
}

TEST(ReadIndexText, RefusesAFifoAtOnceAndNamesAMissingIndex) {
  TempDir tmp;
  auto missing = ReadIndexText(tmp.path());
  ASSERT_TRUE(missing.status().IsNotFound());
  EXPECT_NE(missing.status().message().find("not a shard set?"), std::string::npos);
  ASSERT_EQ(::mkfifo((tmp / "index.json").c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto set = ShardSet::Open(tmp.path());  // blocked for ever before
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.status().message().find("index.json: not a regular file"), std::string::npos)
      << set.status().ToString();
}

}  // namespace
}  // namespace mm::reader::internal
