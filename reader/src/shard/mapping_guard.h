// mapping_guard.h: a read-only file mapping that survives its file being truncated (or its
// storage failing) while it is mapped. Private to mm_reader.
//
// A page of a MAP_SHARED file mapping that lies past the file's end when it is touched raises
// SIGBUS, which kills the process: a shard truncated (or rewritten with `cp`, which truncates
// first) under a Loader, mmtrain or `mmpack bench` did. Every shard mapping is registered here
// while it lives. The first registration installs a process-wide SIGBUS handler: a fault inside
// a registered mapping replaces the pages from the faulting one to the mapping's end with
// zero-filled anonymous pages (mmap MAP_FIXED over them), counts the fault on the mapping and
// returns, so the faulting read retries and reads zeros. The reader then reports the mapping
// as damaged (MappedFile::intact) instead of using what it read; every value it reads from a
// mapping is bound-checked (shard.h), so zeros are refused, never trusted. A SIGBUS anywhere
// else goes to the handler installed before (or the default action: the process dies as it
// would have).
//
// Why this and not pread: the reader's public views (tokens, keys) point into the mapping, and
// its hot path decodes chunks straight from it; reading through pread would copy every chunk
// and table. A handler costs nothing until a file changes under the reader. Why not a lease
// (fcntl F_SETLEASE): leases need the file's owner, do not exist on NFS, and only delay the
// writer by lease-break-time; the reader must still cope when it goes ahead.
//
// Caveats: Python's faulthandler (pytest enables it) or torch's DataLoader workers installing
// their own SIGBUS handler after ours take precedence (then a fault ends the process, as it
// would without ours);
// mmap in a signal handler is not on POSIX's async-signal-safe list but is a plain system call
// on Linux.
//
// Thread-safe: registration is lock-free; the registry's slots are never freed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mm::reader::internal {

/// A registered mapping (opaque; mapping_guard.cc).
struct GuardSlot;

/// Registers [begin, begin + length) (a whole mapping), installing the handler on first use.
/// Never fails (slots are added as needed and never freed).
GuardSlot* RegisterMapping(const void* begin, size_t length);
/// Forgets `slot` before its mapping is unmapped. nullptr: nothing.
void UnregisterMapping(GuardSlot* slot);
/// Faults on the mapping so far (each replaced the rest of the mapping with zeros); 0 for
/// nullptr.
uint32_t MappingFaults(const GuardSlot* slot);

}  // namespace mm::reader::internal
