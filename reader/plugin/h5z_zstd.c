/* h5z_zstd.c: HDF5 dynamically loaded filter plugin for Zstandard (registered filter id 32015).
 *
 * Compatible with the HDF Group's hdf5_plugins (H5Zzstd) and h5py's hdf5plugin:
 *   - cd_values[0] is the compression level (0 or absent: zstd's default level; a negative
 *     "fast" level as its 32-bit two's complement, read back as an int);
 *   - a chunk's stored bytes are one plain Zstandard frame (RFC 8878). Frames written here carry
 *     their content size in the header; frames without it (streaming encoders) still decode.
 *
 * HDF5 finds this library through HDF5_PLUGIN_PATH (for a build tree: `eval "$(mmpack env)"`)
 * and calls H5PLget_plugin_type / H5PLget_plugin_info. On failure the filter pushes an HDF5
 * error (major H5E_PLINE, minor H5E_CANTFILTER) and returns 0, which makes HDF5 fail the read
 * or write that needed it. The filter is stateless and thread-safe in itself (HDF5 serialises
 * its calls anyway).
 *
 * This file is compiled once (the object library mm_h5z_zstd, reader/plugin/CMakeLists.txt)
 * and linked twice: into the plugin with h5z_zstd_plugin.c's two entry points, and into mm_pack,
 * which registers mm_h5z_zstd_class with H5Zregister (tools/src/shard/h5_util.cc), so that mmpack
 * writes and verifies shards without HDF5_PLUGIN_PATH, and so that the filter's name stored in a
 * shard ("zstd") does not depend on whether the plugin happened to be found.
 */
#include "h5z_zstd.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

static size_t mm_zstd_fail(const char* func, int line, const char* message) {
  H5Epush2(H5E_DEFAULT, __FILE__, func, (unsigned)line, H5E_ERR_CLS, H5E_PLINE, H5E_CANTFILTER,
           "zstd filter: %s", message);
  return 0;
}

/* Decompresses a frame whose header lacks the content size, growing the output as needed. */
static size_t mm_zstd_decompress_stream(const void* src, size_t src_size, void** out,
                                        size_t* out_capacity) {
  ZSTD_DStream* stream = ZSTD_createDStream();
  if (stream == NULL) return mm_zstd_fail(__func__, __LINE__, "out of memory");
  size_t capacity = src_size * 4 + ZSTD_DStreamOutSize();
  unsigned char* buffer = (unsigned char*)malloc(capacity);
  if (buffer == NULL) {
    ZSTD_freeDStream(stream);
    return mm_zstd_fail(__func__, __LINE__, "out of memory");
  }
  ZSTD_inBuffer in = {src, src_size, 0};
  ZSTD_outBuffer outb = {buffer, capacity, 0};
  size_t rc = 1;
  while (rc != 0) {
    if (outb.pos == outb.size) {
      size_t grown = capacity * 2;
      unsigned char* bigger = (unsigned char*)realloc(buffer, grown);
      if (bigger == NULL) {
        free(buffer);
        ZSTD_freeDStream(stream);
        return mm_zstd_fail(__func__, __LINE__, "out of memory");
      }
      buffer = bigger;
      capacity = grown;
      outb.dst = buffer;
      outb.size = capacity;
    }
    rc = ZSTD_decompressStream(stream, &outb, &in);
    if (ZSTD_isError(rc)) {
      free(buffer);
      ZSTD_freeDStream(stream);
      return mm_zstd_fail(__func__, __LINE__, ZSTD_getErrorName(rc));
    }
    if (rc != 0 && in.pos == in.size && outb.pos < outb.size) {
      free(buffer);
      ZSTD_freeDStream(stream);
      return mm_zstd_fail(__func__, __LINE__, "truncated frame");
    }
  }
  ZSTD_freeDStream(stream);
  *out = buffer;
  *out_capacity = capacity;
  return outb.pos;
}

static size_t H5Z_filter_zstd(unsigned int flags, size_t cd_nelmts, const unsigned int cd_values[],
                              size_t nbytes, size_t* buf_size, void** buf) {
  void* output = NULL;
  size_t output_capacity = 0;
  size_t output_bytes = 0;

  if (flags & H5Z_FLAG_REVERSE) {
    unsigned long long content = ZSTD_getFrameContentSize(*buf, nbytes);
    if (content == ZSTD_CONTENTSIZE_ERROR) {
      return mm_zstd_fail(__func__, __LINE__, "not a zstd frame");
    }
    if (content == ZSTD_CONTENTSIZE_UNKNOWN) {
      output_bytes = mm_zstd_decompress_stream(*buf, nbytes, &output, &output_capacity);
      if (output == NULL) return 0;
    } else {
      output_capacity = (size_t)content;
      /* malloc(0) may return NULL; an empty chunk still needs a buffer. */
      output = malloc(output_capacity > 0 ? output_capacity : 1);
      if (output == NULL) return mm_zstd_fail(__func__, __LINE__, "out of memory");
      output_bytes = ZSTD_decompress(output, output_capacity, *buf, nbytes);
      if (ZSTD_isError(output_bytes)) {
        free(output);
        return mm_zstd_fail(__func__, __LINE__, ZSTD_getErrorName(output_bytes));
      }
      if (output_bytes != output_capacity) {
        free(output);
        return mm_zstd_fail(__func__, __LINE__, "frame shorter than its content size");
      }
    }
  } else {
    /* A negative (fast) level arrives as its 32-bit two's complement. */
    int level = cd_nelmts > 0 ? (int)cd_values[0] : 0;
    if (level > ZSTD_maxCLevel()) level = ZSTD_maxCLevel();
    if (level < ZSTD_minCLevel()) level = ZSTD_minCLevel();
    output_capacity = ZSTD_compressBound(nbytes);
    output = malloc(output_capacity);
    if (output == NULL) return mm_zstd_fail(__func__, __LINE__, "out of memory");
    /* ZSTD_compress writes the content size into the frame header. */
    output_bytes = ZSTD_compress(output, output_capacity, *buf, nbytes, level);
    if (ZSTD_isError(output_bytes)) {
      free(output);
      return mm_zstd_fail(__func__, __LINE__, ZSTD_getErrorName(output_bytes));
    }
  }

  free(*buf);
  *buf = output;
  *buf_size = output_capacity;
  return output_bytes;
}

const H5Z_class2_t mm_h5z_zstd_class[1] = {{
    H5Z_CLASS_T_VERS,             /* H5Z_class_t version */
    (H5Z_filter_t)MM_H5Z_ZSTD_ID, /* filter id */
    1,                            /* encoder present */
    1,                            /* decoder present */
    "zstd",                       /* filter name, as in hdf5_plugins */
    NULL,                         /* can_apply */
    NULL,                         /* set_local */
    (H5Z_func_t)H5Z_filter_zstd,  /* the filter */
}};
