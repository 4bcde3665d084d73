// loader_state.h: which LoaderState a loader accepts to restore. Private to mm_reader.
#pragma once

#include "mm/reader.h"

namespace mm::reader::internal {

/// OK when `saved` (a state from LoaderState::FromJson) counts positions of the same epoch
/// order as `mine` (the restoring loader's own state): the same order and window, the same set
/// or mixture (identity digest) and caption mode. A field `saved` did not record (older
/// states) is not compared. Errors: InvalidArgument naming what differs, both ways.
Status CheckRestorable(const LoaderState& saved, const LoaderState& mine);

}  // namespace mm::reader::internal
