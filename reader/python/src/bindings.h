// bindings.h: the parts of the _mmpack extension module (reader/python/src), each registered
// by module.cc. The Python package mmpack (reader/python/mmpack) wraps them; users never import
// _mmpack directly.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <string_view>

#include "mm/reader.h"
#include "mm/sample_text.h"

namespace mm::python {

/// _mmpack.ShardSet's C++ object: the opened set and its text reader. Immutable after
/// construction; the set is shared with the Loaders made from it.
struct PyShardSet {
  std::shared_ptr<const reader::ShardSet> set;
  std::unique_ptr<reader::SampleText> text;
  bool verify_checksums = false;
};

/// Text from the shards (keys, captions, sources) as a Python str: UTF-8, with any invalid
/// byte kept as a surrogate escape (the builder never writes one; a damaged shard might).
pybind11::str Utf8(std::string_view s);

void RegisterErrors(pybind11::module_& m);      // errors.cc
void RegisterZstdFilter(pybind11::module_& m);  // zstd_filter.cc
void BindShardSet(pybind11::module_& m);        // shard_set_py.cc
void BindLoader(pybind11::module_& m);          // loader_py.cc

}  // namespace mm::python
