// Tests of text/caption.h: the caption check of `mmpack build`.
#include "text/caption.h"

#include <gtest/gtest.h>

#include <string>

namespace mm::pack {
namespace {

TEST(CheckCaption, EmptyAndWhitespaceOnly) {
  EXPECT_STREQ(CheckCaption(""), "empty_caption");
  EXPECT_STREQ(CheckCaption(" \t\r\n\v\f"), "empty_caption");
  EXPECT_EQ(CheckCaption(" a "), nullptr);
}

TEST(CheckCaption, UnicodeWhiteSpaceOnlyIsEmpty) {
  EXPECT_STREQ(CheckCaption("\xC2\xA0"), "empty_caption");                   // NBSP
  EXPECT_STREQ(CheckCaption("\xC2\xA0\xC2\xA0 \xC2\xA0"), "empty_caption");  // NBSPs, space
  EXPECT_STREQ(CheckCaption("\xE3\x80\x80\xE3\x80\x80"), "empty_caption");   // U+3000 x2
  EXPECT_STREQ(CheckCaption("\xC2\x85\xE1\x9A\x80\xE2\x80\x80\xE2\x80\x8A\xE2\x80\xA8"
                            "\xE2\x80\xA9\xE2\x80\xAF\xE2\x81\x9F\t"),
               "empty_caption");  // U+0085 U+1680 U+2000 U+200A U+2028 U+2029 U+202F U+205F
  // Not White_Space: zero-width space, BOM, information separators; and real text.
  EXPECT_EQ(CheckCaption("\xE2\x80\x8B"), nullptr);  // U+200B
  EXPECT_EQ(CheckCaption("\xEF\xBB\xBF"), nullptr);  // U+FEFF
  EXPECT_EQ(CheckCaption("\x1C"), nullptr);
  EXPECT_EQ(CheckCaption("\xE3\x80\x80\xE7\x8C\xAB\xE3\x80\x80"), nullptr);  // U+3000 猫 U+3000
  EXPECT_EQ(CheckCaption("\xC2\xA0"
                         "a"),
            nullptr);
}

TEST(CheckCaption, StrictUtf8) {
  EXPECT_EQ(CheckCaption("naïve café 日本語 🐱"), nullptr);
  EXPECT_STREQ(CheckCaption("caf\xff\xfe"), "invalid_utf8");
  EXPECT_STREQ(CheckCaption("abc \x80 def"), "invalid_utf8");      // lone continuation
  EXPECT_STREQ(CheckCaption("slash \xc0\xaf"), "invalid_utf8");    // overlong '/'
  EXPECT_STREQ(CheckCaption("\xe0\x80\xaf"), "invalid_utf8");      // overlong, 3 bytes
  EXPECT_STREQ(CheckCaption("\xed\xa0\x80"), "invalid_utf8");      // surrogate U+D800
  EXPECT_STREQ(CheckCaption("\xf4\x90\x80\x80"), "invalid_utf8");  // above U+10FFFF
  EXPECT_STREQ(CheckCaption("cut \xe6\x97"), "invalid_utf8");      // truncated sequence
  EXPECT_EQ(CheckCaption("\xf4\x8f\xbf\xbf"), nullptr);            // U+10FFFF itself
  EXPECT_STREQ(CheckCaption(std::string("before\0after", 12)), "nul_in_caption");
}

TEST(CheckCaption, OverMaxBytesIsTooLargeBeforeAnythingElse) {
  EXPECT_EQ(CheckCaption("abcd", 4), nullptr);
  EXPECT_STREQ(CheckCaption("abcde", 4), "caption_too_large");
  EXPECT_STREQ(CheckCaption("\xff\xfe\xfd", 2), "caption_too_large");  // not read as UTF-8
  // The default: 64 KiB.
  EXPECT_EQ(CheckCaption(std::string(kDefaultMaxCaptionBytes, 'a')), nullptr);
  EXPECT_STREQ(CheckCaption(std::string(kDefaultMaxCaptionBytes + 1, 'a')), "caption_too_large");
}

}  // namespace
}  // namespace mm::pack
