// set_path.cc: see mm/internal/set_path.h.
#include "mm/internal/set_path.h"

#include <filesystem>
#include <system_error>

namespace mm {

namespace fs = std::filesystem;

Status CheckSetPath(const std::string& dir, const std::string& name) {
  std::error_code ec;
  const fs::path root = fs::canonical(fs::path(dir), ec);
  if (ec) return Status::IOError("cannot resolve the set's folder " + dir + ": " + ec.message());
  const fs::path entry = fs::path(dir) / name;
  if (!fs::exists(fs::symlink_status(entry, ec))) return Status::OK();
  const fs::path target = fs::canonical(entry, ec);
  if (ec) {
    return Status::Corruption(
        name + " in " + root.string() +
        " cannot be resolved (a dangling or looping symlink?): " + ec.message());
  }
  if (target.parent_path() != root) {
    return Status::Corruption(name + " resolves to " + target.string() +
                              ", outside the set's folder " + root.string() +
                              "; refusing to read it");
  }
  return Status::OK();
}

}  // namespace mm
