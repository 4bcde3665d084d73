// self_contained.cc: see self_contained.h.
#include "shard/self_contained.h"

#include <string>

#include "mm/format.h"
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

Status CheckGroup(hid_t group, const std::string& prefix);

// The object `name` of `loc` (a hard link) is a dataset with no external storage, or, at the
// root, the group of kept fields (`metadata`, whose links are checked the same way).
Status CheckObject(hid_t loc, const char* name, const std::string& prefix) {
  const std::string path = prefix + name;
  H5O_info_t info;
  if (H5Oget_info_by_name2(loc, name, &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
    return h5::ErrorFromStack(StatusCode::kCorruption, "object '" + path + "'");
  }
  if (info.type == H5O_TYPE_GROUP && prefix.empty() &&
      std::string(name) == format::kMetadataGroup) {
    MM_ASSIGN_OR_RETURN(h5::Group group,
                        h5::Own<h5::Group>(H5Gopen2(loc, name, H5P_DEFAULT), "group '" + path + "'",
                                           StatusCode::kCorruption));
    return CheckGroup(group.get(), path + "/");
  }
  if (info.type != H5O_TYPE_DATASET) {
    return Status::Corruption("object '" + path +
                              "' is not a dataset; a shard holds datasets only (and the group "
                              "'metadata' of them)");
  }
  MM_ASSIGN_OR_RETURN(h5::Dataset dset, h5::OpenDataset(loc, name));
  MM_ASSIGN_OR_RETURN(h5::PropList dcpl,
                      h5::Own<h5::PropList>(H5Dget_create_plist(dset.get()), "dcpl"));
  const int external = H5Pget_external_count(dcpl.get());
  if (external != 0) {
    h5::ClearErrors();
    return Status::Corruption("dataset '" + path + "' has external storage (" +
                              std::to_string(external) +
                              " files); a shard holds all its own bytes");
  }
  return Status::OK();
}

struct Visit {
  hid_t loc;
  std::string prefix;  // "" at the root, "metadata/" in the group of kept fields
  Status status;
};

herr_t OnLink(hid_t, const char* name, const H5L_info_t* info, void* data) {
  auto* visit = static_cast<Visit*>(data);
  if (info->type != H5L_TYPE_HARD) {
    visit->status =
        Status::Corruption("link '" + visit->prefix + name + "' is " + LinkTypeName(info->type) +
                           "; a shard holds hard links only");
    return 1;
  }
  visit->status = CheckObject(visit->loc, name, visit->prefix);
  return visit->status.ok() ? 0 : 1;
}

Status CheckGroup(hid_t group, const std::string& prefix) {
  Visit visit{group, prefix, Status::OK()};
  hsize_t at = 0;
  const herr_t r = H5Literate(group, H5_INDEX_NAME, H5_ITER_NATIVE, &at, OnLink, &visit);
  if (!visit.status.ok()) return visit.status;
  if (r < 0) {
    return h5::ErrorFromStack(StatusCode::kCorruption,
                              prefix.empty() ? "listing the root group" : "listing " + prefix);
  }
  return Status::OK();
}

}  // namespace

Status CheckSelfContained(hid_t file) { return CheckGroup(file, ""); }

Status CheckShardSelfContained(const std::string& path) {
  MM_ASSIGN_OR_RETURN(h5::File file,
                      h5::Own<h5::File>(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                                        "not a readable HDF5 file", StatusCode::kCorruption));
  return CheckSelfContained(file.get());
}

Status CheckDatasetSelfContained(hid_t file, const char* name) {
  // "metadata/url": the link to the group of kept fields is a hard link too.
  const std::string path = name;
  const size_t slash = path.find('/');
  if (slash != std::string::npos) {
    const std::string group = path.substr(0, slash);
    H5L_info_t group_info;
    if (group != format::kMetadataGroup ||
        H5Lget_info(file, group.c_str(), &group_info, H5P_DEFAULT) < 0 ||
        group_info.type != H5L_TYPE_HARD) {
      h5::ClearErrors();
      return Status::Corruption("link '" + group + "' is not the hard link of group 'metadata'");
    }
  }
  H5L_info_t info;
  if (H5Lget_info(file, name, &info, H5P_DEFAULT) < 0) {
    return h5::ErrorFromStack(StatusCode::kCorruption, std::string("link '") + name + "'");
  }
  Visit visit{file, "", Status::OK()};
  OnLink(file, name, &info, &visit);
  return visit.status;
}

}  // namespace mm::pack
