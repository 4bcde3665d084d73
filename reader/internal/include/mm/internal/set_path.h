// mm/internal/set_path.h: a file a shard set names (a shard, tokenizer.model) must be a file of
// the set's own folder. index.json's names are already plain names (mm/filename.h refuses "/",
// "..", NUL), but the folder entry may be a symlink: `shard-000000.h5 -> /home/x/secret.h5` or
// `tokenizer.model -> ../other/tokenizer.model` would make verify, show or the reader read a
// file outside the set. CheckSetPath resolves the path through every symlink
// and refuses it unless it lands in the set's folder (itself resolved). A symlink to another
// file of the same folder is allowed: it reads nothing outside.
//
// Internal (mm_reader_internal); compiled into mm_reader (reader/src/set/set_path.cc). Thread-safe.
#pragma once

#include <string>

#include "mm/status.h"

namespace mm {

/// Checks that `dir`/`name` resolves (std::filesystem::canonical) to a file directly inside the
/// canonical `dir`. A missing file passes (the caller's open names it).
/// Errors: Corruption ("shard-000000.h5 resolves to /home/x/secret.h5, outside the set's
/// folder /data/out; refusing to read it"), IOError (the folder cannot be resolved).
[[nodiscard]] Status CheckSetPath(const std::string& dir, const std::string& name);

}  // namespace mm
