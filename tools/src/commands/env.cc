// env.cc: `mmpack env` (commands.h): where h5dump and h5py find the zstd filter plugin.
#include <filesystem>
#include <string>
#include <vector>

#include "commands/commands.h"

// The plugin's folder relative to the folder of the mmpack executable, in the order looked at
// (tools/CMakeLists.txt): MM_PLUGIN_BESIDE_BIN for a build tree (BUILD/bin/mmpack ->
// BUILD/hdf5-plugins) and for the Python package (mmpack/bin/mmpack -> mmpack/hdf5-plugins);
// MM_PLUGIN_INSTALLED for `cmake --install` and the .deb (PREFIX/bin/mmpack ->
// PREFIX/lib/hdf5/plugins, or an absolute folder chosen at configure time). Relative, so that a
// moved or installed mmpack never names a folder of the machine it was built on.
#ifndef MM_PLUGIN_BESIDE_BIN
#define MM_PLUGIN_BESIDE_BIN "../hdf5-plugins"
#endif
#ifndef MM_PLUGIN_INSTALLED
#define MM_PLUGIN_INSTALLED "../lib/hdf5/plugins"
#endif

namespace mm::pack {

namespace fs = std::filesystem;

Result<std::string> EnvScript() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::IOError("cannot read /proc/self/exe: " + ec.message());
  std::vector<fs::path> tried;
  for (const char* relative : {MM_PLUGIN_BESIDE_BIN, MM_PLUGIN_INSTALLED}) {
    fs::path dir = (exe.parent_path() / relative).lexically_normal();  // absolute stays absolute
    if (fs::is_regular_file(dir / "libh5z_zstd.so", ec)) {
      return "# mmpack: lets h5dump and h5py read zstd-compressed shards (HDF5 filter 32015)\n"
             "export HDF5_PLUGIN_PATH='" +
             dir.string() + "'${HDF5_PLUGIN_PATH:+:$HDF5_PLUGIN_PATH}\n";
    }
    tried.push_back(dir);
  }
  return Status::NotFound("the zstd filter plugin libh5z_zstd.so is not beside " + exe.string() +
                          " (looked in " + tried[0].string() + " and " + tried[1].string() + ")");
}

}  // namespace mm::pack
