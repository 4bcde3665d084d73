// mm/internal/checksum.h: the two digests of a shard set, each computed in one place.
//
//   XXH3-64 (xxHash, seed 0) of every shard file: index.json "xxh3_64", written by the writer,
//     checked by `mmpack verify` and by ShardSet::Open with verify_checksums.
//   SHA-256 (FIPS 180-4, OpenSSL EVP) of the tokenizer model: index.json "tokenizer.sha256" and
//     the shards' "tokenizer_sha256" attribute.
// Both as lowercase hex, the form index.json stores.
//
// Internal (reader/internal/include, through the mm_reader_internal target); compiled into
// mm_reader (reader/src/base/checksum.cc). Thread-safe: no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "mm/status.h"

namespace mm {

/// An XXH3-64 digest as 16 lowercase hex digits (the form index.json stores).
std::string Xxh3Hex64(uint64_t digest);

/// XXH3-64 (seed 0) of `size` bytes at `data`, as 16 lowercase hex digits.
std::string Xxh3Hex(const void* data, size_t size);

/// XXH3-64 of what `fd` reads from its current offset to its end, as Xxh3Hex.
/// Errors: IOError ("read PATH: <strerror>", `path` naming the file in the message).
[[nodiscard]] Result<std::string> Xxh3HexOfFd(int fd, const std::string& path);

/// XXH3-64 of the regular file `path` (opened as OpenRegularFile does).
/// Errors: those of OpenRegularFile and Xxh3HexOfFd.
[[nodiscard]] Result<std::string> Xxh3HexOfFile(const std::string& path);

/// SHA-256 of `bytes` as 64 lowercase hex digits.
std::string Sha256Hex(std::string_view bytes);

/// SHA-256 of the regular file `path` (opened as OpenRegularFile does), as Sha256Hex.
/// Errors: those of OpenRegularFile; IOError ("reading PATH: <strerror>"); Internal (OpenSSL).
[[nodiscard]] Result<std::string> Sha256HexOfFile(const std::string& path);

/// SHA-256 of `size` bytes of the regular file `path` from byte `offset` (-1: to its end), as
/// Sha256Hex: the x-amz-content-sha256 of one part of a multipart upload.
/// Errors: those of Sha256HexOfFile; IOError (the file ends before offset + size).
[[nodiscard]] Result<std::string> Sha256HexOfFileRange(const std::string& path, int64_t offset,
                                                       int64_t size);

}  // namespace mm
