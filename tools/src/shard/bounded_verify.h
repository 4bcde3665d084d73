// bounded_verify.h: ShardVerifier::Verify (verifier.h) run through RunBounded
// (bounded_query.h), so that libhdf5 parsing a damaged shard can neither hang nor crash
// `mmpack verify`. The child gets a copy of the set's keys (fork), checks the shard's keys
// against it, and sends back its verdict, the bad sample and the shard's keys; the parent adds
// those keys to the set's. Not thread-safe (see bounded_query.h).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "mm/reader.h"
#include "mm/status.h"
#include "shard/verifier.h"

namespace mm::pack {

/// The verdict of one bounded verification.
struct BoundedVerdict {
  int64_t sample = -1;                     // the first bad sample, or -1
  std::vector<std::string> keys_of_shard;  // the shard's keys, once read (to name a sample)
};

/// In a bounded child (bounds from BoundsForFile of `file_bytes`): CheckShardSelfContained
/// (nothing outside the file), verifier->Verify(path, e, ...), then CheckShardRules against
/// `info` (the reader's rules). On success adds the shard's keys to `*keys` (the set the verifier
/// was made with). Errors: those of Verify; those of RunBounded (a hang or crash inside libhdf5 is
/// a Corruption naming `path`).
[[nodiscard]] Status VerifyShardBounded(ShardVerifier* verifier,
                                        std::unordered_set<std::string>* keys,
                                        const std::string& path, int64_t file_bytes,
                                        const ShardExpectation& e, const mm::reader::SetInfo& info,
                                        BoundedVerdict* verdict);

}  // namespace mm::pack
