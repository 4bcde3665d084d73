// bindings.h: the parts of the _mmpack extension module (reader/python/src), each registered
// by module.cc. The Python package mmpack (reader/python/mmpack) wraps them; users never import
// _mmpack directly.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "mm/reader.h"
#include "mm/sample_text.h"

namespace mm::python {

/// _mmpack.ShardSet's C++ object: the opened set and its text reader; the set is shared with
/// the Loaders made from it. A remote set's per-sample accessors pin the sample's shard for the
/// call and keep the last shard used pinned (`kept`, guarded by `kept_mu`), so that reading a
/// shard's samples in turn downloads and maps it once.
struct PyShardSet {
  std::shared_ptr<const reader::ShardSet> set;
  std::unique_ptr<reader::SampleText> text;
  bool verify_checksums = false;
  reader::RemoteOptions remote;  // as opened: cache_dir, cache_limit
  std::mutex kept_mu;
  size_t kept_shard = 0;
  reader::ShardPin kept;  // empty: none kept (always so for a local set)
};

/// A pin on the shard of sample `i` (already range-checked) of a remote set, held by the caller
/// while it reads the sample (an empty pin for a local set). Releases the GIL while it downloads.
/// Throws the pin's error (OSError naming the URL, mmpack.CorruptionError...).
reader::ShardPin PinSampleShard(PyShardSet& s, int64_t i);

/// Text from the shards (keys, captions, sources) as a Python str: UTF-8, with any invalid
/// byte kept as a surrogate escape (the builder never writes one; a damaged shard might).
pybind11::str Utf8(std::string_view s);

void RegisterErrors(pybind11::module_& m);      // errors.cc
void RegisterZstdFilter(pybind11::module_& m);  // zstd_filter.cc
void BindShardSet(pybind11::module_& m);        // shard_set_py.cc
void BindLoader(pybind11::module_& m);          // loader_py.cc

}  // namespace mm::python
