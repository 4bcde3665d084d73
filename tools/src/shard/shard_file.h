// shard_file.h: the HDF5 layout of one shard file (format v1, schemas/FORMAT.md), as building
// blocks for ShardWriter (private to shard/). These are the choices that make the same samples
// give byte-identical files: libver bounds earliest..v110, object timestamps off (file and
// every dataset), no fill values for fixed-size types, tables contiguous, `images` chunked one
// sample per chunk and written chunk by chunk (direct chunk writes of bytes compressed
// beforehand), the zstd filter registered in-process; the writer creates datasets and
// attributes in a fixed order. HDF5 from one thread at a time.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mm/format.h"
#include "mm/metadata.h"
#include "mm/status.h"
#include "shard/h5_util.h"

namespace mm::pack {

/// One dataset of the embedded schema (schemas/shard_v1.json): its dtype ("uint8", "int32",
/// "int64", "string-fixed", "string-vlen"), rank and layout.
struct SchemaDataset {
  std::string dtype;
  size_t rank = 0;
  std::string layout;
};
using SchemaDatasets = std::map<std::string, SchemaDataset>;

/// The datasets of the embedded schema, by name: the twelve a shard may hold (`images` for codec
/// raw; image_bytes, image_offsets, image_size for codec jpeg; the eight tables of both).
/// Errors: Internal (the embedded schema is not valid JSON or lists other datasets).
[[nodiscard]] Result<SchemaDatasets> LoadSchemaDatasets();

/// Creates (truncating) the shard file `path`. Errors: IOError, Internal.
[[nodiscard]] Result<h5::File> CreateShardFile(const std::string& path);

/// Creates `images`: [0, height, width, 3] (extendible), chunked [1, height, width, 3], with
/// the zstd filter at `level` (optional flag) for Codec::kZstd. Errors: Internal.
[[nodiscard]] Result<h5::Dataset> CreateImages(hid_t file, const SchemaDataset& schema, int height,
                                               int width, format::Codec codec, int level);

/// Extends `images` to `index` + 1 samples and writes `chunk` (stored bytes) as sample `index`.
/// Errors: IOError.
[[nodiscard]] Status AppendImageChunk(hid_t images, int64_t index, int height, int width,
                                      const std::vector<uint8_t>& chunk);

/// Writes the contiguous uint8 dataset `name` ([bytes]) from the first `bytes` bytes of the file
/// `fd` (read back in 8 MiB blocks: the JPEGs of a shard, spooled while it filled).
/// Errors: Internal (a schema other than contiguous uint8 [B]), IOError.
[[nodiscard]] Status WriteBytesFromFd(hid_t file, const char* name, const SchemaDataset& schema,
                                      int fd, uint64_t bytes);

/// Writes the contiguous table `name` of shape `dims` from `data` (of `mem_type`); its file
/// type is the schema's numeric dtype, little-endian. An empty table gets no storage.
/// Errors: Internal (a rank or dtype the schema does not give), IOError.
[[nodiscard]] Status WriteNumericTable(hid_t file, const char* name, const SchemaDataset& schema,
                                       const std::vector<hsize_t>& dims, hid_t mem_type,
                                       const void* data);

/// Writes the contiguous string table `name`: UTF-8, variable-length ("string-vlen") or
/// NUL-padded to the longest value, at least 1 byte ("string-fixed"), as the schema says.
/// Errors: Internal, IOError.
[[nodiscard]] Status WriteStringTable(hid_t file, const char* name, const SchemaDataset& schema,
                                      const std::vector<std::string>& values);

/// The shortest decimal text that reads back as `value` ("0.31", "1e+20", "nan"; as Python's
/// repr of a float): a float in a string column of kept fields, and `mmpack show`'s text.
std::string FloatText(double value);

/// Writes the group `metadata` with one contiguous dataset [N] per kept field (`names[k]`,
/// values `columns[k]`, N each), typed per column as schemas/FORMAT.md "Kept fields" says:
/// int64 when every value is an integer; float64 when every value is a number or missing
/// (missing: NaN; also a column with no value at all); else variable-length UTF-8 strings
/// (integers and floats as their shortest round-trip text, missing as ""). The group has no
/// timestamps, so the bytes depend only on the values. Errors: Internal, IOError.
[[nodiscard]] Status WriteMetadataGroup(
    hid_t file, const std::vector<std::string>& names,
    const std::vector<std::vector<mm::reader::MetadataValue>>& columns);

}  // namespace mm::pack
