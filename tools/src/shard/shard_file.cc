// shard_file.cc: see shard_file.h.
#include "shard/shard_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "mm/internal/file.h"

namespace mm::pack {
namespace {

// File datatype for a numeric schema dtype (little-endian, as FORMAT.md says).
Result<hid_t> NumericFileType(const std::string& dtype) {
  if (dtype == "uint8") return H5T_STD_U8LE;
  if (dtype == "int32") return H5T_STD_I32LE;
  if (dtype == "int64") return H5T_STD_I64LE;
  return Status::Internal("schema dtype '" + dtype + "' is not numeric");
}

// Dataset creation properties shared by every dataset: no timestamps; no fill values for
// fixed-size types (HDF5 requires the fill machinery for variable-length strings).
Result<h5::PropList> BaseDcpl(bool variable_length) {
  MM_ASSIGN_OR_RETURN(h5::PropList dcpl,
                      h5::Own<h5::PropList>(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"));
  MM_RETURN_NOT_OK(h5::Check(H5Pset_obj_track_times(dcpl.get(), false), "track_times"));
  if (!variable_length) {
    MM_RETURN_NOT_OK(h5::Check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "fill_time"));
  }
  return dcpl;
}

// A contiguous dataset `name` of `dims` written from `data`.
Status WriteContiguous(hid_t file, const char* name, const std::vector<hsize_t>& dims,
                       hid_t file_type, hid_t mem_type, const void* data) {
  MM_ASSIGN_OR_RETURN(
      h5::Dataspace space,
      h5::Own<h5::Dataspace>(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                             "H5Screate_simple"));
  MM_ASSIGN_OR_RETURN(h5::PropList dcpl, BaseDcpl(H5Tis_variable_str(file_type) > 0));
  MM_RETURN_NOT_OK(h5::Check(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), "H5Pset_layout"));
  MM_ASSIGN_OR_RETURN(h5::Dataset dset,
                      h5::Own<h5::Dataset>(H5Dcreate2(file, name, file_type, space.get(),
                                                      H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                                           std::string("H5Dcreate2(") + name + ")"));
  hsize_t elements = 1;
  for (hsize_t d : dims) elements *= d;
  // An empty dataset (tokens when T == 0) is left unallocated: H5Dget_offset is undefined.
  if (elements > 0) {
    MM_RETURN_NOT_OK(h5::Check(H5Dwrite(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                               std::string("H5Dwrite(") + name + ")", StatusCode::kIOError));
  }
  return dset.Close();
}

}  // namespace

Result<SchemaDatasets> LoadSchemaDatasets() {
  nlohmann::json schema = nlohmann::json::parse(format::SchemaJson(), nullptr, false);
  if (schema.is_discarded() || !schema.contains("datasets")) {
    return Status::Internal("embedded shard schema is not valid JSON with 'datasets'");
  }
  SchemaDatasets out;
  for (const auto& d : schema["datasets"]) {
    SchemaDataset sd;
    sd.dtype = d.value("dtype", "");
    sd.rank = d.contains("shape") ? d["shape"].size() : 0;
    sd.layout = d.value("layout", "any");
    out[d.value("name", "")] = sd;
  }
  for (const char* name :
       {format::kImages, format::kImageBytes, format::kImageOffsets, format::kImageSize,
        format::kKeys, format::kSources, format::kOriginalSize, format::kValidBox,
        format::kCaptionOffsets, format::kCaptions, format::kTokenOffsets, format::kTokens}) {
    if (out.count(name) == 0) {
      return Status::Internal(std::string("embedded schema lacks dataset '") + name + "'");
    }
  }
  if (out.size() != 12) {
    return Status::Internal("embedded schema lists datasets this writer does not write");
  }
  return out;
}

Result<h5::File> CreateShardFile(const std::string& path) {
  MM_ASSIGN_OR_RETURN(h5::PropList fcpl,
                      h5::Own<h5::PropList>(H5Pcreate(H5P_FILE_CREATE), "H5Pcreate"));
  MM_RETURN_NOT_OK(h5::Check(H5Pset_obj_track_times(fcpl.get(), false), "track_times"));
  MM_ASSIGN_OR_RETURN(h5::PropList fapl,
                      h5::Own<h5::PropList>(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate"));
  MM_RETURN_NOT_OK(
      h5::Check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_EARLIEST, H5F_LIBVER_V110), "libver"));
  return h5::Own<h5::File>(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()),
                           "creating " + path, StatusCode::kIOError);
}

Result<h5::Dataset> CreateImages(hid_t file, const SchemaDataset& schema, int height, int width,
                                 format::Codec codec, int level) {
  const hsize_t h = static_cast<hsize_t>(height);
  const hsize_t w = static_cast<hsize_t>(width);
  hsize_t dims[4] = {0, h, w, 3};
  hsize_t max_dims[4] = {H5S_UNLIMITED, h, w, 3};
  hsize_t chunk[4] = {1, h, w, 3};
  MM_ASSIGN_OR_RETURN(h5::Dataspace space,
                      h5::Own<h5::Dataspace>(H5Screate_simple(4, dims, max_dims), "H5S"));
  MM_ASSIGN_OR_RETURN(h5::PropList dcpl, BaseDcpl(/*variable_length=*/false));
  MM_RETURN_NOT_OK(h5::Check(H5Pset_chunk(dcpl.get(), 4, chunk), "H5Pset_chunk"));
  MM_RETURN_NOT_OK(
      h5::Check(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_INCR), "H5Pset_alloc_time"));
  if (codec == format::Codec::kZstd) {
    // A negative (fast) level is stored as its 32-bit two's complement (-1: 4294967295, as
    // h5dump prints it); filters read cd_values[0] back as an int.
    const unsigned cd_values[1] = {static_cast<unsigned>(level)};
    MM_RETURN_NOT_OK(
        h5::Check(H5Pset_filter(dcpl.get(), format::kZstdFilterId, H5Z_FLAG_OPTIONAL, 1, cd_values),
                  "H5Pset_filter(zstd)"));
  }
  MM_ASSIGN_OR_RETURN(hid_t file_type, NumericFileType(schema.dtype));
  return h5::Own<h5::Dataset>(H5Dcreate2(file, format::kImages, file_type, space.get(), H5P_DEFAULT,
                                         dcpl.get(), H5P_DEFAULT),
                              "H5Dcreate2(images)");
}

Status AppendImageChunk(hid_t images, int64_t index, int height, int width,
                        const std::vector<uint8_t>& chunk) {
  const hsize_t n = static_cast<hsize_t>(index);
  hsize_t dims[4] = {n + 1, static_cast<hsize_t>(height), static_cast<hsize_t>(width), 3};
  MM_RETURN_NOT_OK(
      h5::Check(H5Dset_extent(images, dims), "H5Dset_extent(images)", StatusCode::kIOError));
  hsize_t offset[4] = {n, 0, 0, 0};
  return h5::Check(
      H5Dwrite_chunk(images, H5P_DEFAULT, /*filters=*/0, offset, chunk.size(), chunk.data()),
      "H5Dwrite_chunk(images)", StatusCode::kIOError);
}

Status WriteBytesFromFd(hid_t file, const char* name, const SchemaDataset& schema, int fd,
                        uint64_t bytes) {
  if (schema.dtype != "uint8" || schema.rank != 1 || schema.layout != "contiguous") {
    return Status::Internal(std::string("schema of '") + name + "' is not contiguous uint8 [B]");
  }
  const hsize_t dims[1] = {static_cast<hsize_t>(bytes)};
  MM_ASSIGN_OR_RETURN(h5::Dataspace space,
                      h5::Own<h5::Dataspace>(H5Screate_simple(1, dims, nullptr), "H5S"));
  MM_ASSIGN_OR_RETURN(h5::PropList dcpl, BaseDcpl(/*variable_length=*/false));
  MM_RETURN_NOT_OK(h5::Check(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), "H5Pset_layout"));
  MM_ASSIGN_OR_RETURN(h5::Dataset dset,
                      h5::Own<h5::Dataset>(H5Dcreate2(file, name, H5T_STD_U8LE, space.get(),
                                                      H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                                           std::string("H5Dcreate2(") + name + ")"));
  constexpr uint64_t kBlock = uint64_t{8} << 20;  // bounded memory whatever the shard's size
  std::vector<uint8_t> block(static_cast<size_t>(std::min(bytes, kBlock)));
  for (uint64_t done = 0; done < bytes;) {
    const size_t n = static_cast<size_t>(std::min(kBlock, bytes - done));
    for (size_t got = 0; got < n;) {
      const ssize_t r = ::pread(fd, block.data() + got, n - got, static_cast<off_t>(done + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return ErrnoStatus(r < 0 ? errno : EIO, std::string("reading back ") + name);
      got += static_cast<size_t>(r);
    }
    const hsize_t start[1] = {static_cast<hsize_t>(done)}, count[1] = {static_cast<hsize_t>(n)};
    MM_ASSIGN_OR_RETURN(h5::Dataspace mem,
                        h5::Own<h5::Dataspace>(H5Screate_simple(1, count, nullptr), "H5S"));
    MM_RETURN_NOT_OK(h5::Check(
        H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr),
        "H5Sselect_hyperslab"));
    MM_RETURN_NOT_OK(h5::Check(H5Dwrite(dset.get(), H5T_NATIVE_UINT8, mem.get(), space.get(),
                                        H5P_DEFAULT, block.data()),
                               std::string("H5Dwrite(") + name + ")", StatusCode::kIOError));
    done += n;
  }
  return dset.Close();
}

Status WriteNumericTable(hid_t file, const char* name, const SchemaDataset& schema,
                         const std::vector<hsize_t>& dims, hid_t mem_type, const void* data) {
  if (schema.rank != dims.size()) {
    return Status::Internal(std::string("writer rank of '") + name + "' differs from schema");
  }
  MM_ASSIGN_OR_RETURN(hid_t file_type, NumericFileType(schema.dtype));
  return WriteContiguous(file, name, dims, file_type, mem_type, data);
}

Status WriteStringTable(hid_t file, const char* name, const SchemaDataset& schema,
                        const std::vector<std::string>& values) {
  std::vector<hsize_t> dims = {values.size()};
  if (schema.dtype == "string-vlen") {
    MM_ASSIGN_OR_RETURN(h5::Datatype type, h5::VlenUtf8Type());
    std::vector<const char*> pointers;
    pointers.reserve(values.size());
    for (const auto& v : values) pointers.push_back(v.c_str());
    return WriteContiguous(file, name, dims, type.get(), type.get(), pointers.data());
  }
  if (schema.dtype == "string-fixed") {
    size_t width = 1;
    for (const auto& v : values) width = std::max(width, v.size());
    MM_ASSIGN_OR_RETURN(h5::Datatype type, h5::FixedUtf8Type(width));
    std::vector<char> buffer(values.size() * width, '\0');
    for (size_t i = 0; i < values.size(); ++i) {
      std::memcpy(buffer.data() + i * width, values[i].data(), values[i].size());
    }
    return WriteContiguous(file, name, dims, type.get(), type.get(), buffer.data());
  }
  return Status::Internal(std::string("schema dtype of '") + name + "' is not a string");
}

std::string FloatText(double value) {
  char buffer[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

namespace {

// The dtype of one shard's column of a kept field (schemas/FORMAT.md "Kept fields"): every
// value is stored exactly, in the narrowest type that holds them all.
enum class MetadataColumn { kInt64, kUint64, kFloat64, kStrings };

MetadataColumn ColumnKind(const std::vector<mm::reader::MetadataValue>& column) {
  using Type = mm::reader::MetadataValue::Type;
  constexpr int64_t kExactInDouble = int64_t{1} << 53;
  bool all_int = !column.empty(), all_nonneg = true, any_uint = false, all_number = true;
  bool ints_exact_in_double = true;
  for (const auto& v : column) {
    const bool integer = v.type == Type::kInt || v.type == Type::kUint;
    all_int &= integer;
    any_uint |= v.type == Type::kUint;
    all_nonneg &= v.type != Type::kInt || v.i >= 0;
    all_number &= v.type != Type::kString;
    if (v.type == Type::kInt)
      ints_exact_in_double &= v.i >= -kExactInDouble && v.i <= kExactInDouble;
    if (v.type == Type::kUint) ints_exact_in_double = false;  // >= 2^63
  }
  if (all_int && !any_uint) return MetadataColumn::kInt64;
  if (all_int && all_nonneg) return MetadataColumn::kUint64;
  if (all_number && ints_exact_in_double) return MetadataColumn::kFloat64;
  return MetadataColumn::kStrings;  // integers past 2^53 beside floats or gaps: as text, exact
}

}  // namespace

Status WriteMetadataGroup(hid_t file, const std::vector<std::string>& names,
                          const std::vector<std::vector<mm::reader::MetadataValue>>& columns) {
  using Type = mm::reader::MetadataValue::Type;
  MM_ASSIGN_OR_RETURN(h5::PropList gcpl,
                      h5::Own<h5::PropList>(H5Pcreate(H5P_GROUP_CREATE), "H5Pcreate"));
  MM_RETURN_NOT_OK(h5::Check(H5Pset_obj_track_times(gcpl.get(), false), "track_times"));
  MM_ASSIGN_OR_RETURN(h5::Group group,
                      h5::Own<h5::Group>(H5Gcreate2(file, format::kMetadataGroup, H5P_DEFAULT,
                                                    gcpl.get(), H5P_DEFAULT),
                                         "H5Gcreate2(metadata)"));
  for (size_t k = 0; k < names.size(); ++k) {
    const auto& column = columns.at(k);
    const std::vector<hsize_t> dims = {column.size()};
    const char* name = names[k].c_str();
    const MetadataColumn kind = ColumnKind(column);
    if (kind == MetadataColumn::kInt64) {
      std::vector<int64_t> values;
      for (const auto& v : column) values.push_back(v.i);
      MM_RETURN_NOT_OK(
          WriteContiguous(group.get(), name, dims, H5T_STD_I64LE, H5T_NATIVE_INT64, values.data()));
    } else if (kind == MetadataColumn::kUint64) {
      std::vector<uint64_t> values;
      for (const auto& v : column) {
        values.push_back(v.type == Type::kUint ? v.u : static_cast<uint64_t>(v.i));
      }
      MM_RETURN_NOT_OK(WriteContiguous(group.get(), name, dims, H5T_STD_U64LE, H5T_NATIVE_UINT64,
                                       values.data()));
    } else if (kind == MetadataColumn::kFloat64) {
      std::vector<double> values;
      for (const auto& v : column) {
        values.push_back(v.type == Type::kInt     ? static_cast<double>(v.i)
                         : v.type == Type::kUint  ? static_cast<double>(v.u)
                         : v.type == Type::kFloat ? v.f
                                                  : std::numeric_limits<double>::quiet_NaN());
      }
      MM_RETURN_NOT_OK(WriteContiguous(group.get(), name, dims, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                                       values.data()));
    } else {
      std::vector<std::string> text;
      for (const auto& v : column) {
        text.push_back(v.type == Type::kString  ? v.s
                       : v.type == Type::kInt   ? std::to_string(v.i)
                       : v.type == Type::kUint  ? std::to_string(v.u)
                       : v.type == Type::kFloat ? FloatText(v.f)
                                                : std::string());
      }
      MM_ASSIGN_OR_RETURN(h5::Datatype type, h5::VlenUtf8Type());
      std::vector<const char*> pointers;
      for (const auto& t : text) pointers.push_back(t.c_str());
      MM_RETURN_NOT_OK(
          WriteContiguous(group.get(), name, dims, type.get(), type.get(), pointers.data()));
    }
  }
  return group.Close();
}

}  // namespace mm::pack
