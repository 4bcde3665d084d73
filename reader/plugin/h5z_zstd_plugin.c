/* h5z_zstd_plugin.c: the two entry points that make h5z_zstd.c a dynamically loaded HDF5
 * filter plugin (libh5z_zstd.so, found through HDF5_PLUGIN_PATH: `eval "$(mmpack env)"`). */
#include <H5PLextern.h>

#include "h5z_zstd.h"

H5PL_type_t H5PLget_plugin_type(void) { return H5PL_TYPE_FILTER; }

const void* H5PLget_plugin_info(void) { return mm_h5z_zstd_class; }
