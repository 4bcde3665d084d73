// mm/internal/libjpeg_error.h: libjpeg's error manager as mmpack uses it, the one translation
// of libjpeg's error convention, for the reader's JPEG region decoder
// (reader/src/transforms/jpeg_region.cc) and the writer's encoder
// (tools/src/image/jpeg_encode.cc). Internal (mm_reader_internal); header-only: whoever
// includes it links libjpeg.
//
// libjpeg reports an error through error_exit, which must not return: ErrorExit formats the
// message and longjmps to the caller's setjmp, so the frames between must hold no C++ object
// with a destructor. Warnings (level -1: libjpeg's name for damaged data it decodes through by
// painting grey) are errors too: mmpack only reads and writes its own or already-checked bytes.
#pragma once

// jpeglib.h needs size_t and FILE declared first.
#include <csetjmp>
#include <cstdio>
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

namespace mm::reader::internal {

struct JpegErrorManager {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] inline void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  longjmp(err->jump, 1);
}

// Warnings become errors; trace messages (level >= 0) are dropped.
inline void JpegEmitMessage(j_common_ptr cinfo, int level) {
  if (level < 0) JpegErrorExit(cinfo);
}

/// Points `cinfo->err` at `err`, with the two functions above.
inline void InstallJpegErrors(j_common_ptr cinfo, JpegErrorManager* err) {
  cinfo->err = jpeg_std_error(&err->pub);
  err->pub.error_exit = JpegErrorExit;
  err->pub.emit_message = JpegEmitMessage;
}

}  // namespace mm::reader::internal
