// set_publish.h: how a finished build replaces OUT, under the build lock
// (set_lock.h).
//
// What --overwrite may delete: an empty folder, or an mmpack shard set: a valid index.json (the
// reader's strict decoder) and nothing in the folder that the set does not list (its shards,
// its tokenizer file, report.json), each a regular file. A folder that merely holds a file named
// index.json, report.json or shard-*.h5 is someone's data and is refused.
//
// How: renameat2(RENAME_EXCHANGE) swaps the staging folder and OUT in one step, so OUT is never
// missing; the old set, now in the staging folder, is then deleted. Where the file system
// cannot exchange (EINVAL, ENOSYS), OUT is renamed aside to "OUT.mmpack-old" and the new set
// renamed in; a kill between those renames leaves OUT missing and the old set aside, and the
// next build (RecoverInterruptedPublish) renames it back before anything else, or deletes it
// when the new set did arrive.
#pragma once

#include <filesystem>
#include <ostream>

#include "mm/status.h"

namespace mm::pack {

/// Checks that the existing folder `dir` may be replaced: empty, or a shard set as above.
/// Errors: AlreadyExists ("output 'x' is not an mmpack shard set (it holds notes.txt, which
/// the set does not list); refusing to delete it").
[[nodiscard]] Status CheckReplaceable(const std::filesystem::path& dir);

/// Finishes what a killed Publish of `out` left: "OUT.mmpack-old" renamed back to OUT when OUT
/// is missing, deleted when OUT exists (and it is a set, as CheckReplaceable says). Says what
/// it did on `log`. Errors: IOError (a rename or delete refused; the message names both paths).
[[nodiscard]] Status RecoverInterruptedPublish(const std::filesystem::path& out, std::ostream& log);

/// Moves the finished set `staging` to `out`, replacing an older OUT (already checked by
/// CheckReplaceable) as described above. Errors: IOError (OUT is then as it was, or the
/// message says where the old set lies).
[[nodiscard]] Status Publish(const std::filesystem::path& staging,
                             const std::filesystem::path& out);

/// Publish of the set in `staging`, and of nothing else: the files its
/// index.json lists (shards, tokenizer, report.json, index.json). Anything else found there (a
/// user's notes.txt, a folder) is not published: the set's files are moved into a fresh folder
/// "OUT.mmpack-publish", which is published, and the rest is left in `staging`, named in one
/// line on `log`. Errors: those of Publish; Corruption (no valid index.json in `staging`).
[[nodiscard]] Status PublishListed(const std::filesystem::path& staging,
                                   const std::filesystem::path& out, std::ostream& log);

}  // namespace mm::pack
