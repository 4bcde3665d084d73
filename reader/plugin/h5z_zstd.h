/* h5z_zstd.h: the Zstandard HDF5 filter (registered id 32015), as a filter class that a program
 * registers with H5Zregister (mm_pack does) or that the plugin hands to HDF5
 * (h5z_zstd_plugin.c). The filter itself is h5z_zstd.c; see its header comment. */
#ifndef MM_H5Z_ZSTD_H_
#define MM_H5Z_ZSTD_H_

#include <hdf5.h>

#define MM_H5Z_ZSTD_ID 32015

#ifdef __cplusplus
extern "C" {
#endif

/* The filter class: id MM_H5Z_ZSTD_ID, name "zstd", encoder and decoder present. */
extern const H5Z_class2_t mm_h5z_zstd_class[1];

#ifdef __cplusplus
}
#endif

#endif /* MM_H5Z_ZSTD_H_ */
