// brace.h: WebDataset shard lists written as brace patterns, `shards-{00000..00099}.tar`
// (ingest/'s wds reader and the build's path checks; ingest.h says where they are read).
#pragma once

#include <string>
#include <vector>

#include "mm/status.h"

namespace mm::pack {

/// The most '{' a brace list may hold.
inline constexpr int kMaxBraceGroups = 256;

/// Whether `text` holds a brace group ("{...}") that ExpandBraces would expand.
bool HasBraceGroup(const std::string& text);

/// The strings `text` names, in order, as webdataset's and bash's brace expansion give them:
/// `{a,b,c}` is each alternative (which may themselves hold groups), `{N..M}` each integer
/// from N to M (either way round) written with at least as many digits as the wider bound
/// when either is written with a leading zero (`{000..012}` -> 000, 001, ..., 012); groups
/// multiply left to right. Text without a group is itself.
/// Errors: InvalidArgument (an unclosed or empty group, a range bound that is not an integer,
/// more than `max_count` names, more than kMaxBraceGroups groups).
[[nodiscard]] Result<std::vector<std::string>> ExpandBraces(const std::string& text,
                                                            size_t max_count = 1000000);

}  // namespace mm::pack
