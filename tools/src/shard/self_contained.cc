// self_contained.cc: see self_contained.h.
#include "shard/self_contained.h"

#include <string>

#include "shard/h5_util.h"

namespace mm::pack {
namespace {

const char* LinkTypeName(H5L_type_t type) {
  switch (type) {
    case H5L_TYPE_SOFT:
      return "a soft link";
    case H5L_TYPE_EXTERNAL:
      return "an external link (to another file)";
    default:
      return "a user-defined link";
  }
}

// The object `name` (a hard link) is a dataset with no external storage.
Status CheckObject(hid_t file, const char* name) {
  H5O_info_t info;
  if (H5Oget_info_by_name2(file, name, &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
    return h5::ErrorFromStack(StatusCode::kCorruption, std::string("object '") + name + "'");
  }
  if (info.type != H5O_TYPE_DATASET) {
    return Status::Corruption(std::string("object '") + name +
                              "' is not a dataset; a shard's root holds datasets only");
  }
  MM_ASSIGN_OR_RETURN(h5::Dataset dset, h5::OpenDataset(file, name));
  MM_ASSIGN_OR_RETURN(h5::PropList dcpl,
                      h5::Own<h5::PropList>(H5Dget_create_plist(dset.get()), "dcpl"));
  const int external = H5Pget_external_count(dcpl.get());
  if (external != 0) {
    h5::ClearErrors();
    return Status::Corruption(std::string("dataset '") + name + "' has external storage (" +
                              std::to_string(external) +
                              " files); a shard holds all its own bytes");
  }
  return Status::OK();
}

struct Visit {
  hid_t file;
  Status status;
};

herr_t OnLink(hid_t, const char* name, const H5L_info_t* info, void* data) {
  auto* visit = static_cast<Visit*>(data);
  if (info->type != H5L_TYPE_HARD) {
    visit->status =
        Status::Corruption(std::string("link '") + name + "' is " + LinkTypeName(info->type) +
                           "; a shard holds hard links only");
    return 1;
  }
  visit->status = CheckObject(visit->file, name);
  return visit->status.ok() ? 0 : 1;
}

}  // namespace

Status CheckSelfContained(hid_t file) {
  Visit visit{file, Status::OK()};
  hsize_t at = 0;
  const herr_t r = H5Literate(file, H5_INDEX_NAME, H5_ITER_NATIVE, &at, OnLink, &visit);
  if (!visit.status.ok()) return visit.status;
  if (r < 0) return h5::ErrorFromStack(StatusCode::kCorruption, "listing the root group");
  return Status::OK();
}

Status CheckShardSelfContained(const std::string& path) {
  MM_ASSIGN_OR_RETURN(h5::File file,
                      h5::Own<h5::File>(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                                        "not a readable HDF5 file", StatusCode::kCorruption));
  return CheckSelfContained(file.get());
}

Status CheckDatasetSelfContained(hid_t file, const char* name) {
  H5L_info_t info;
  if (H5Lget_info(file, name, &info, H5P_DEFAULT) < 0) {
    return h5::ErrorFromStack(StatusCode::kCorruption, std::string("link '") + name + "'");
  }
  Visit visit{file, Status::OK()};
  OnLink(file, name, &info, &visit);
  return visit.status;
}

}  // namespace mm::pack
