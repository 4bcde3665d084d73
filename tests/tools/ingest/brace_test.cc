// Tests of ingest/brace.h: WebDataset brace lists expand as webdataset's braceexpand and bash
// expand them.
#include "ingest/brace.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mm::pack {
namespace {

using Names = std::vector<std::string>;

Names Expand(const std::string& text) {
  auto r = ExpandBraces(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  return r.ok() ? *r : Names{};
}

TEST(ExpandBraces, ZeroPaddedRangeKeepsItsWidth) {
  EXPECT_EQ(Expand("d/shards-{00008..00011}.tar"),
            (Names{"d/shards-00008.tar", "d/shards-00009.tar", "d/shards-00010.tar",
                   "d/shards-00011.tar"}));
  EXPECT_EQ(Expand("{9..11}"), (Names{"9", "10", "11"}));  // no leading zero: no padding
  EXPECT_EQ(Expand("{3..1}"), (Names{"3", "2", "1"}));
  EXPECT_EQ(Expand("{-1..01}"), (Names{"-1", "00", "01"}));
}

TEST(ExpandBraces, AlternativesNestAndGroupsMultiplyLeftToRight) {
  EXPECT_EQ(Expand("{a,b}-{1..2}"), (Names{"a-1", "a-2", "b-1", "b-2"}));
  EXPECT_EQ(Expand("x{a,{b,c}d}y"), (Names{"xay", "xbdy", "xcdy"}));
  EXPECT_EQ(Expand("{a,}"), (Names{"a", ""}));
  EXPECT_EQ(Expand("plain.tar"), (Names{"plain.tar"}));
  EXPECT_EQ(Expand("{only}.tar"), (Names{"{only}.tar"}));  // one alternative is text, as in bash
}

TEST(ExpandBraces, MalformedListsAreRefusedWithTheText) {
  for (const char* bad : {"a{", "a}", "{}", "{1..x}", "{a..3}"}) {
    auto r = ExpandBraces(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  auto huge = ExpandBraces("{0..99}{0..99}", 1000);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("10000"), std::string::npos) << huge.status().message();
  EXPECT_FALSE(ExpandBraces("{0..9999999999}").ok());
  // Deep nesting and long runs of one-alternative groups are refused, not recursed into.
  EXPECT_FALSE(ExpandBraces(std::string(100000, '{') + "x" + std::string(100000, '}')).ok());
  std::string groups;
  for (int i = 0; i < 100000; ++i) groups += "{x}";
  EXPECT_FALSE(ExpandBraces(groups).ok());
  EXPECT_TRUE(ExpandBraces("{a,{b,{c,{d}}}}").ok());
}

TEST(HasBraceGroup, NeedsAnOpeningBeforeAClosing) {
  EXPECT_TRUE(HasBraceGroup("s-{0..3}.tar"));
  EXPECT_FALSE(HasBraceGroup("s-}{.tar"));
  EXPECT_FALSE(HasBraceGroup("plain.tar"));
}

}  // namespace
}  // namespace mm::pack
