// feed.h: the feed format: samples streamed one by one by a program (mmpack.Writer,
// reader/python/mmpack/_writer.py) into `mmpack build - --input-format feed`, read into the
// same sample list the other formats make (ingest.h), so the build after it is the same.
//
// The stream, all integers little-endian (a private contract between mmpack.Writer and the
// build of the same version, never stored):
//   "MMFEED1\n"                         8 bytes, once
//   then records, each opened by one tag byte:
//   'S' a sample   str key      "" : the source without its extension (the manifests' rule)
//                  str source   the name report.json and the shards give it (not empty)
//                  u32 n, then n str captions, in order
//                  u32 m (FieldNames::extra's count), then m fields, in extra's order:
//                    u8 type (FieldValue::Type: 0 missing, 1 int, 2 float, 3 string, 4 uint),
//                    then i64 | f64 | str | u64 (nothing for missing)
//                  u8 image kind, then 'P': str path (a file the build reads, as a manifest's)
//                                      'B': u64 n, then n bytes of an encoded image
//   'E' the end    u64 the count of 'S' records before it
//   str: u32 byte count (at most 1 GiB), then the bytes.
// A stream that stops before 'E' (the writing program failed or was killed) is an error, so a
// build fed by a program that died publishes nothing.
#pragma once

#include <filesystem>

#include "ingest/ingest.h"
#include "mm/status.h"

namespace mm::pack {

/// The feed's first 8 bytes.
inline constexpr char kFeedMagic[] = "MMFEED1\n";

/// Reads the feed from the descriptor `fd` up to its end record into IngestResult::list (format
/// kFeed), with IngestToList's rules after it (captions cut to fields.max_caption_bytes + 1,
/// names that are not UTF-8 reported, repeated keys made unique: "<key>#2"...), spilling in
/// `spill_dir`. Each 'B' image is written to a file of `image_dir` (the caller's: it must
/// outlive the build, which reads the files later; nothing else is written there).
/// Errors: Corruption (not a feed, a record malformed or cut short, no end record: names the
/// record), IOError (reading `fd`; writing `image_dir` or `spill_dir`).
[[nodiscard]] Result<IngestResult> IngestFeed(int fd, const FieldNames& fields,
                                              const std::filesystem::path& image_dir,
                                              const std::filesystem::path& spill_dir);

}  // namespace mm::pack
