// mm/internal/zstd_codec.h: Zstandard (RFC 8878) for image chunks: the one place where zstd's
// error convention (ZSTD_isError, ZSTD_getErrorName) becomes a Status.
//
// An image chunk is one zstd frame that carries its content size (the reader, `mmpack verify`
// and the HDF5 filter size their output from it) and a 4-byte content checksum (any flipped
// bit fails the decode). The HDF5 filter plugin (reader/plugin/h5z_zstd.c) is C and reports
// through HDF5's error stack instead.
//
// Internal (reader/internal/include, through the mm_reader_internal target); compiled into
// mm_reader (reader/src/base/zstd_codec.cc). Thread-safe: each thread has its own contexts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mm/status.h"

namespace mm::zstd {

/// The levels zstd accepts: MinLevel() (its fastest, negative) .. MaxLevel() (22).
int MinLevel();
int MaxLevel();

/// Compresses `size` bytes at `src` into one frame at `level`, with content size and checksum.
/// zstd clamps a level outside MinLevel()..MaxLevel() (callers check the range first).
/// Errors: InvalidArgument (parameters zstd refuses), Internal (zstd's message).
[[nodiscard]] Result<std::vector<uint8_t>> Compress(const uint8_t* src, size_t size, int level);

/// The decoded size a frame's header states; kNotAFrame when `src` does not start a zstd frame,
/// kUnknownSize when the header leaves the size out (streaming encoders).
inline constexpr uint64_t kNotAFrame = ~uint64_t{0};
inline constexpr uint64_t kUnknownSize = ~uint64_t{0} - 1;
uint64_t FrameContentSize(const uint8_t* src, size_t size);

/// Decodes the frame `src` (`size` bytes) into `dst`, which holds exactly `expected` bytes.
/// Errors: Corruption ("image chunk is not a zstd frame"; "zstd frame holds N bytes, expected
/// M"; "zstd: <zstd's message>" for a damaged frame or checksum; "zstd decoded N bytes,
/// expected M"), Internal (no context). Callers put the chunk's name before the message.
[[nodiscard]] Status Decompress(const uint8_t* src, size_t size, uint8_t* dst, size_t expected);

}  // namespace mm::zstd
