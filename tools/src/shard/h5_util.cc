// h5_util.cc: writer-side HDF5 helpers (see h5_util.h).
#include "shard/h5_util.h"

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "h5z_zstd.h"  // the zstd filter of reader/plugin, linked in (mm_h5z_zstd)

namespace mm::h5 {

Status RegisterZstdFilter() {
  static std::once_flag once;
  static herr_t rc = 0;
  std::call_once(once, [] { rc = H5Zregister(mm_h5z_zstd_class); });
  if (rc < 0) return ErrorFromStack(StatusCode::kInternal, "H5Zregister(zstd 32015)");
  return Status::OK();
}

Result<Datatype> VlenUtf8Type() {
  MM_ASSIGN_OR_RETURN(Datatype type, Own<Datatype>(H5Tcopy(H5T_C_S1), "H5Tcopy"));
  MM_RETURN_NOT_OK(Check(H5Tset_size(type.get(), H5T_VARIABLE), "H5Tset_size(variable)"));
  MM_RETURN_NOT_OK(Check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "H5Tset_cset"));
  return type;
}

Result<Datatype> FixedUtf8Type(size_t bytes) {
  MM_ASSIGN_OR_RETURN(Datatype type, Own<Datatype>(H5Tcopy(H5T_C_S1), "H5Tcopy"));
  MM_RETURN_NOT_OK(Check(H5Tset_size(type.get(), bytes < 1 ? 1 : bytes), "H5Tset_size"));
  MM_RETURN_NOT_OK(Check(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "H5Tset_strpad"));
  MM_RETURN_NOT_OK(Check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "H5Tset_cset"));
  return type;
}

namespace {

Status WriteScalarAttribute(hid_t object, const char* name, hid_t file_type, hid_t mem_type,
                            const void* value) {
  MM_ASSIGN_OR_RETURN(Dataspace space, Own<Dataspace>(H5Screate(H5S_SCALAR), "H5Screate"));
  MM_ASSIGN_OR_RETURN(
      Attribute attr,
      Own<Attribute>(H5Acreate2(object, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                     std::string("H5Acreate2(") + name + ")"));
  MM_RETURN_NOT_OK(
      Check(H5Awrite(attr.get(), mem_type, value), std::string("H5Awrite(") + name + ")"));
  return attr.Close();
}

}  // namespace

Status WriteAttribute(hid_t object, const char* name, const std::string& value) {
  MM_ASSIGN_OR_RETURN(Datatype type, VlenUtf8Type());
  const char* text = value.c_str();
  return WriteScalarAttribute(object, name, type.get(), type.get(), &text);
}

Status WriteAttribute(hid_t object, const char* name, int32_t value) {
  return WriteScalarAttribute(object, name, H5T_STD_I32LE, H5T_NATIVE_INT32, &value);
}

Status WriteAttribute(hid_t object, const char* name, int64_t value) {
  return WriteScalarAttribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

namespace {

Result<Attribute> OpenAttribute(hid_t object, const char* name) {
  htri_t exists = H5Aexists(object, name);
  if (exists < 0) return ErrorFromStack(StatusCode::kCorruption, std::string("attribute ") + name);
  if (exists == 0) return Status::NotFound(std::string("attribute '") + name + "' is missing");
  return Own<Attribute>(H5Aopen(object, name, H5P_DEFAULT), std::string("H5Aopen(") + name + ")",
                        StatusCode::kCorruption);
}

}  // namespace

Result<std::string> ReadStringAttribute(hid_t object, const char* name) {
  MM_ASSIGN_OR_RETURN(Attribute attr, OpenAttribute(object, name));
  MM_ASSIGN_OR_RETURN(Datatype type, Own<Datatype>(H5Aget_type(attr.get()), "H5Aget_type"));
  if (H5Tget_class(type.get()) != H5T_STRING) {
    return Status::Corruption(std::string("attribute '") + name + "' is not a string");
  }
  MM_ASSIGN_OR_RETURN(Dataspace space, Own<Dataspace>(H5Aget_space(attr.get()), "H5Aget_space"));
  if (H5Sget_simple_extent_npoints(space.get()) != 1) {
    return Status::Corruption(std::string("attribute '") + name + "' is not a scalar");
  }
  if (H5Tis_variable_str(type.get()) > 0) {
    MM_ASSIGN_OR_RETURN(Datatype mem, VlenUtf8Type());
    char* text = nullptr;
    MM_RETURN_NOT_OK(Check(H5Aread(attr.get(), mem.get(), &text),
                           std::string("H5Aread(") + name + ")", StatusCode::kCorruption));
    std::string value = text ? text : "";
    H5free_memory(text);
    return value;
  }
  size_t size = H5Tget_size(type.get());
  std::string value(size, '\0');
  MM_ASSIGN_OR_RETURN(Datatype mem, Own<Datatype>(H5Tcopy(type.get()), "H5Tcopy"));
  MM_RETURN_NOT_OK(Check(H5Aread(attr.get(), mem.get(), value.data()),
                         std::string("H5Aread(") + name + ")", StatusCode::kCorruption));
  value.resize(std::strlen(value.c_str()));
  return value;
}

Result<int64_t> ReadIntAttribute(hid_t object, const char* name) {
  MM_ASSIGN_OR_RETURN(Attribute attr, OpenAttribute(object, name));
  MM_ASSIGN_OR_RETURN(Datatype type, Own<Datatype>(H5Aget_type(attr.get()), "H5Aget_type"));
  if (H5Tget_class(type.get()) != H5T_INTEGER) {
    return Status::Corruption(std::string("attribute '") + name + "' is not an integer");
  }
  int64_t value = 0;
  MM_RETURN_NOT_OK(Check(H5Aread(attr.get(), H5T_NATIVE_INT64, &value),
                         std::string("H5Aread(") + name + ")", StatusCode::kCorruption));
  return value;
}

Result<Dataset> OpenDataset(hid_t file, const char* name) {
  return Own<Dataset>(H5Dopen2(file, name, H5P_DEFAULT), std::string("opening ") + name,
                      StatusCode::kCorruption);
}

Status ReadWhole(hid_t dset, hid_t mem_type, void* buffer, size_t count, const char* name) {
  if (count == 0) return Status::OK();
  return Check(H5Dread(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer),
               std::string("reading ") + name, StatusCode::kCorruption);
}

Result<std::vector<std::string>> ReadFixedStrings(hid_t file, const char* name, size_t count) {
  MM_ASSIGN_OR_RETURN(Dataset dset, OpenDataset(file, name));
  MM_ASSIGN_OR_RETURN(Datatype type, Own<Datatype>(H5Dget_type(dset.get()), "H5Dget_type"));
  const size_t width = H5Tget_size(type.get());
  std::vector<char> buffer(count * width);
  MM_RETURN_NOT_OK(ReadWhole(dset.get(), type.get(), buffer.data(), count, name));
  std::vector<std::string> out(count);
  for (size_t i = 0; i < count; ++i) {
    const char* p = buffer.data() + i * width;
    out[i].assign(p, strnlen(p, width));
  }
  return out;
}

Result<std::vector<std::string>> ReadVlenStrings(hid_t file, const char* name, size_t count) {
  MM_ASSIGN_OR_RETURN(Dataset dset, OpenDataset(file, name));
  MM_ASSIGN_OR_RETURN(Datatype type, VlenUtf8Type());
  std::vector<char*> pointers(count, nullptr);
  MM_RETURN_NOT_OK(ReadWhole(dset.get(), type.get(), pointers.data(), count, name));
  std::vector<std::string> out(count);
  for (size_t i = 0; i < count; ++i) {
    if (pointers[i] != nullptr) out[i] = pointers[i];
    H5free_memory(pointers[i]);
  }
  return out;
}

Result<std::vector<hsize_t>> DatasetDims(hid_t dataset) {
  MM_ASSIGN_OR_RETURN(Dataspace space, Own<Dataspace>(H5Dget_space(dataset), "H5Dget_space"));
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) return ErrorFromStack(StatusCode::kInternal, "H5Sget_simple_extent_ndims");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    return ErrorFromStack(StatusCode::kInternal, "H5Sget_simple_extent_dims");
  }
  return dims;
}

void SkipLibraryCloseAtExit() { (void)H5dont_atexit(); }

}  // namespace mm::h5
