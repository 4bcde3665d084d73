// env.cc: `mmpack env` (commands.h): where h5dump and h5py find the zstd filter plugin.
#include <filesystem>
#include <string>

#include "commands/commands.h"

namespace mm::pack {

namespace fs = std::filesystem;

std::string EnvScript() {
  // The build tree's plugin folder; for an installed mmpack (bin/mmpack), the plugin that
  // `cmake --install` put in lib/hdf5/plugins beside it.
  std::string dir = MM_PLUGIN_DIR;
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / "libh5z_zstd.so", ec)) {
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    fs::path installed = exe.parent_path().parent_path() / "lib" / "hdf5" / "plugins";
    if (!ec && fs::exists(installed / "libh5z_zstd.so", ec)) dir = installed.string();
  }
  return "# mmpack: lets h5dump and h5py read zstd-compressed shards (HDF5 filter 32015)\n"
         "export HDF5_PLUGIN_PATH='" +
         dir + "'${HDF5_PLUGIN_PATH:+:$HDF5_PLUGIN_PATH}\n";
}

}  // namespace mm::pack
