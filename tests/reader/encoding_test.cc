// The shared encodings: strict UTF-8 (mm/internal/utf8.h), zstd image chunks
// (mm/internal/zstd_codec.h), shard file names (mm/filename.h), the public Span.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mm/filename.h"
#include "mm/format.h"
#include "mm/internal/byte_size.h"
#include "mm/internal/utf8.h"
#include "mm/internal/zstd_codec.h"
#include "mm/span.h"

namespace mm {
namespace {

TEST(ParseByteSize, BinaryAndDecimalUnitsAsTheFieldWritesThem) {
  EXPECT_EQ(ParseByteSize("4096").value(), 4096);
  EXPECT_EQ(ParseByteSize("4096B").value(), 4096);
  EXPECT_EQ(ParseByteSize("1k").value(), 1024);
  EXPECT_EQ(ParseByteSize("1KiB").value(), 1024);
  EXPECT_EQ(ParseByteSize("1KB").value(), 1000);
  EXPECT_EQ(ParseByteSize("256MB").value(), 256000000);
  EXPECT_EQ(ParseByteSize("1.5GiB").value(), 1610612736);
  EXPECT_EQ(ParseByteSize("20gib").value(), int64_t{20} << 30);
  EXPECT_EQ(ParseByteSize("2TB").value(), 2000000000000);
  EXPECT_EQ(ParseByteSize("1TiB").value(), int64_t{1} << 40);
  EXPECT_EQ(ParseByteSize("1.9").value(), 1);  // whole bytes, rounded down
}

TEST(ParseByteSize, RefusesWhatIsNotAPositiveSizeSayingWhy) {
  for (const char* bad :
       {"", "GiB", "-1", "0", "0.4", "1.2.3", "12 GB", "5PB", "1e3", "x1", "10000000TB"}) {
    Result<int64_t> r = ParseByteSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("is not a byte size"), std::string::npos) << bad;
  }
}

TEST(FirstInvalidUtf8, PointsAtTheLeadByteOfTheFirstBadSequence) {
  EXPECT_EQ(FirstInvalidUtf8("naïve café 日本語 🐱"), std::string_view::npos);
  EXPECT_EQ(FirstInvalidUtf8("\xf4\x8f\xbf\xbf"), std::string_view::npos);  // U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("ab\xc3"), 2u);                                // truncated
  EXPECT_EQ(FirstInvalidUtf8("abc \x80 def"), 4u);                          // lone continuation
  EXPECT_EQ(FirstInvalidUtf8("x\xc0\xaf"), 1u);                             // overlong '/'
  EXPECT_EQ(FirstInvalidUtf8("\xe0\x80\xaf"), 0u);                          // overlong, 3 bytes
  EXPECT_EQ(FirstInvalidUtf8("ok\xed\xa0\x80"), 2u);                        // surrogate U+D800
  EXPECT_EQ(FirstInvalidUtf8("\xf4\x90\x80\x80"), 0u);                      // above U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("\xe2\x82"
                             "a"),
            0u);  // cut by ASCII
  EXPECT_EQ(FirstInvalidUtf8("\xff"), 0u);
  EXPECT_TRUE(IsValidUtf8(std::string("nul \0 is valid", 14)));
  EXPECT_FALSE(IsValidUtf8("caf\xe9"));
}

TEST(ZstdCodec, RoundTripsAFrameThatCarriesItsSize) {
  std::vector<uint8_t> pixels(40 * 32 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 13 / 7);
  auto frame = zstd::Compress(pixels.data(), pixels.size(), -1);
  ASSERT_TRUE(frame.ok()) << frame.status().ToString();
  EXPECT_EQ(zstd::FrameContentSize(frame->data(), frame->size()), pixels.size());
  std::vector<uint8_t> back(pixels.size());
  ASSERT_TRUE(zstd::Decompress(frame->data(), frame->size(), back.data(), back.size()).ok());
  EXPECT_EQ(back, pixels);
}

TEST(ZstdCodec, NamesWhatIsWrongWithABadFrame) {
  std::vector<uint8_t> pixels(1000, 7);
  auto frame = zstd::Compress(pixels.data(), pixels.size(), 3).MoveValue();
  std::vector<uint8_t> out(pixels.size());
  Status wrong_size = zstd::Decompress(frame.data(), frame.size(), out.data(), 999);
  EXPECT_EQ(wrong_size.message(), "zstd frame holds 1000 bytes, expected 999");
  std::vector<uint8_t> garbage(64, 0x42);
  EXPECT_EQ(zstd::FrameContentSize(garbage.data(), garbage.size()), zstd::kNotAFrame);
  EXPECT_EQ(zstd::Decompress(garbage.data(), garbage.size(), out.data(), out.size()).message(),
            "image chunk is not a zstd frame");
  frame[frame.size() - 2] ^= 0x40;  // inside the content checksum
  Status damaged = zstd::Decompress(frame.data(), frame.size(), out.data(), out.size());
  EXPECT_TRUE(damaged.IsCorruption());
  EXPECT_EQ(damaged.message().rfind("zstd: ", 0), 0u) << damaged.message();
}

TEST(ShardFileName, IsBuiltAndParsedFromTheIndexAlone) {
  EXPECT_EQ(format::ShardFileName(0), "shard-000000.h5");
  EXPECT_EQ(format::ShardFileName(7), "shard-000007.h5");
  EXPECT_EQ(format::ShardFileName(1234567), "shard-1234567.h5");
  EXPECT_EQ(format::TempShardFileName(7), "shard-000007.h5.tmp");
  for (int64_t i : {0, 1, 999999, 1000000, 123456789}) {
    int64_t back = -1;
    ASSERT_TRUE(format::ParseShardFileName(format::ShardFileName(i), &back)) << i;
    EXPECT_EQ(back, i);
  }
  for (const char* name :
       {"shard-.h5", "shard-12a.h5", "shard-000001.h5.tmp", "x/shard-000001.h5", "Shard-000001.h5",
        "shard-000001.hdf5", "index.json", "shard-99999999999999999999.h5"}) {
    EXPECT_FALSE(format::ParseShardFileName(name, nullptr)) << name;
  }
}

TEST(FormatOptions, CodecAndResizeModeNamesAreTheStoredText) {
  EXPECT_EQ(format::ToString(format::Codec::kZstd), "zstd");
  EXPECT_EQ(format::ToString(format::Codec::kNone), "none");
  EXPECT_EQ(format::ToString(format::ResizeMode::kCenterCrop), "center-crop");
  EXPECT_EQ(format::ToString(format::ResizeMode::kPad), "pad");
  EXPECT_EQ(format::ToString(format::ResizeMode::kStretch), "stretch");
  for (format::Codec c : format::kCodecs) EXPECT_EQ(format::ParseCodec(format::ToString(c)), c);
  for (format::ResizeMode m : format::kResizeModes) {
    EXPECT_EQ(format::ParseResizeMode(format::ToString(m)), m);
  }
  EXPECT_FALSE(format::ParseCodec("gzip").has_value());
  EXPECT_FALSE(format::ParseResizeMode("Pad").has_value());
}

TEST(Span, ViewsContiguousElementsWithoutOwningThem) {
  const std::vector<int32_t> ids = {2, 17, 3};
  Span<const int32_t> all(ids);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1], 17);
  EXPECT_EQ(std::vector<int32_t>(all.begin(), all.end()), ids);
  Span<const int32_t> tail(ids.data() + 1, 2);
  EXPECT_EQ(tail.data(), ids.data() + 1);
  EXPECT_TRUE(Span<const int32_t>().empty());
}

}  // namespace
}  // namespace mm
