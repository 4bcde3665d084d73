// self_contained.h: a shard must hold all its own bytes. HDF5 can point outside the file: a
// dataset with external storage (H5Pset_external) reads raw bytes of any other file, and soft
// or external links (H5Lcreate_soft, H5Lcreate_external) resolve to other objects or other
// files. mmpack writes none of them; verify and show refuse a shard that has any, before they
// read a table (followed, they would make verify print bytes of other files as token ids).
// HDF5 from one thread at a time.
#pragma once

#include <hdf5.h>

#include <string>

#include "mm/status.h"

namespace mm::pack {

/// Checks every link of `file`'s root group: a hard link to a dataset whose storage is inside
/// the file (H5Pget_external_count == 0). Errors: Corruption ("link 'captions' is a soft link;
/// a shard holds hard links only", "dataset 'tokens' has external storage (2 files); a shard
/// holds all its bytes").
[[nodiscard]] Status CheckSelfContained(hid_t file);

/// CheckSelfContained on the shard file `path`, opened read-only. Errors: as above; Corruption
/// (not an HDF5 file).
[[nodiscard]] Status CheckShardSelfContained(const std::string& path);

/// The same for dataset `name` alone (show reads one dataset). Errors: as above.
[[nodiscard]] Status CheckDatasetSelfContained(hid_t file, const char* name);

}  // namespace mm::pack
