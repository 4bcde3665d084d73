// c_handles.h: the owners of the C handles that only mmpack's tools hold (libarchive's readers,
// TurboJPEG's handles, libvips' images and the memory GLib hands out), one line each, in the
// shape of the reader's mm/internal/c_handles.h (whose CDeleter they use), so that the reader's
// internal headers include none of these libraries.
//
// Including this header links nothing: a deleter's library is linked by the code that creates
// the handle (ingest/ links libarchive, image/ and shard/ TurboJPEG, image/ libvips).
#pragma once

#include <archive.h>
#include <turbojpeg.h>

#include <memory>

#include "mm/internal/c_handles.h"

// libvips and GLib are declared here, not included: their headers need GLib's include
// directories, which only the image code has. These are the declarations of <glib.h>
// (gpointer is void*) and <vips/vips.h> (VipsImage is struct _VipsImage).
struct _VipsImage;
extern "C" {
void g_object_unref(void* object);
void g_free(void* memory);
}

namespace mm {

using ArchiveReadPtr = std::unique_ptr<archive, CDeleter<archive_read_free>>;  // ingest/wds.h
using TjHandlePtr = std::unique_ptr<void, CDeleter<tjDestroy>>;  // tjhandle is void*; image/
using VipsImagePtr = std::unique_ptr<_VipsImage, CDeleter<g_object_unref>>;  // one reference
using GMemoryPtr = std::unique_ptr<void, CDeleter<g_free>>;  // memory libvips hands out
using GStringPtr = std::unique_ptr<char, CDeleter<g_free>>;  // text libvips hands out

}  // namespace mm
