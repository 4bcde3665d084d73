// jpeg_encode.h: the JPEG that `mmpack build --codec jpeg` stores (format 2,
// schemas/FORMAT.md "Stored JPEGs"): baseline, 4:2:0, with restart markers that let the
// loader's crops Huffman-decode only the MCUs they cover (reader/src/transforms/jpeg_region.h).
//
// The writer's, compiled into a library of its own (mm_pack_jpeg_encode, tools/CMakeLists.txt)
// so that the build and the reader's tests write the same bytes. Thread-safe: one compressor
// per thread.
#pragma once

#include <cstdint>
#include <vector>

#include "mm/status.h"

namespace mm::image {

/// The restart interval, in MCUs, of a stored JPEG `width` pixels wide: 2 when its row of
/// 16-pixel MCUs (4:2:0) has an even count, else 1. Restart intervals then never straddle two
/// MCU rows, so every 32 (or 16) pixel column band of every MCU row is a separately decodable
/// run of entropy-coded bytes (ITU-T T.81 F.1.2.3: a restart resets the DC predictions and
/// byte-aligns the data). Costs about 2.5% (5% at an odd count) of a 256-px photo's bytes.
int JpegRestartMcus(int width);

/// Encodes [height, width, 3] uint8 RGB (rows packed) as a baseline JPEG through libjpeg-turbo's
/// libjpeg API: `quality` 1..100 (libjpeg's jpeg_set_quality, the IJG tables scaled, clamped to
/// baseline), 4:2:0 chroma subsampling, ISLOW forward DCT, standard Huffman tables (not
/// optimised), JFIF, no EXIF, and a restart marker every `restart_mcus` MCUs (0: none). The same
/// bytes TurboJPEG's tjCompress2(TJSAMP_420) writes, apart from the restart markers and their
/// DRI segment. Errors: InvalidArgument (a size or quality out of range), Internal (libjpeg's
/// message).
[[nodiscard]] Result<std::vector<uint8_t>> EncodeJpegRgb(const uint8_t* rgb, int width, int height,
                                                         int quality, int restart_mcus);

}  // namespace mm::image
