// raw_crop_layout_bench: how a raw set's image chunks could be stored so that a load-time crop
// touches only what it needs, measured on one set's real pixels in one run.
//
// Candidates, each built in memory from the set's decoded images ([H, W, 3] uint8):
//   zstd       one Zstandard frame per image (what format 1 stores with `--compression zstd`):
//              a crop decompresses the whole frame, then resizes its window;
//   bands-R    one frame per R rows (R = 8, 16, 32) and a table of each frame's place (a row-band
//              chunk layout, or frames inside the sample's chunk with a seek table): a crop
//              decompresses only the bands holding the rows the filter reads;
//   none       the raw bytes (format 1 with `--compression none`): a crop resizes its window
//              straight from the stored bytes, reading only the rows and columns it covers.
// Frames are written as mmpack writes its chunks (level LEVEL, content size and checksum).
//
// For each candidate: stored bytes per image (frames only, no table), and CPU per crop
// (CLOCK_PROCESS_CPUTIME_ID, one thread) of N random-resized crops (torchvision's get_params,
// the loader's own window code) resized to SIZE x SIZE with Lanczos-3 and with bilinear, the
// candidates interleaved over ROUNDS rounds (each round runs every candidate on the same
// crops), medians printed. Not a test: nothing is asserted.
//
// Usage: mm_raw_crop_layout_bench SET_DIR [N=4000] [SIZE=224] [ROUNDS=5] [LEVEL=-1] [ONLY]
// ONLY: one layout's name (e.g. none) to time only that one (for a profiler).
#include <time.h>
#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "mm/internal/resample.h"
#include "mm/reader.h"
#include "transforms/crop_resize.h"
#include "transforms/crop_window.h"

namespace {

using mm::image::Filter;
using mm::reader::internal::CropResizePixels;
using mm::reader::internal::CropWindow;

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// One image stored as frames of `band` rows each (band = height: one frame; 0: raw bytes).
struct Stored {
  int band = 0;
  std::vector<uint8_t> bytes;   // the frames, concatenated (or the raw pixels)
  std::vector<size_t> offsets;  // [frames + 1] where each frame starts in bytes
};

Stored Compress(const std::vector<uint8_t>& pixels, int w, int h, int band, int level,
                ZSTD_CCtx* cctx) {
  Stored s;
  s.band = band;
  if (band == 0) {
    s.bytes = pixels;
    return s;
  }
  const size_t row = static_cast<size_t>(w) * 3;
  s.offsets.push_back(0);
  for (int y = 0; y < h; y += band) {
    const size_t n = row * std::min(band, h - y);
    const size_t at = s.bytes.size();
    s.bytes.resize(at + ZSTD_compressBound(n));
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    const size_t got =
        ZSTD_compress2(cctx, s.bytes.data() + at, s.bytes.size() - at, &pixels[y * row], n);
    if (ZSTD_isError(got)) {
      std::fprintf(stderr, "zstd: %s\n", ZSTD_getErrorName(got));
      std::exit(1);
    }
    s.bytes.resize(at + got);
    s.offsets.push_back(s.bytes.size());
  }
  return s;
}

// One crop from a stored image: decompress the bands holding rows [r0, r1) (all for a single
// frame) into scratch, then crop + resize from there (or from the bytes themselves when raw).
void Crop(const Stored& s, int w, int h, const CropWindow& c, int out, Filter filter,
          ZSTD_DCtx* dctx, std::vector<uint8_t>* scratch, uint8_t* dst) {
  if (s.band == 0) {
    CropResizePixels(s.bytes.data(), w, h, c, out, out, false, dst, filter);
    return;
  }
  const size_t row = static_cast<size_t>(w) * 3;
  int r0, r1;
  mm::image::ResampleSupport(h, c.y, c.y + c.h, out, &r0, &r1, filter);
  const int b0 = r0 / s.band, b1 = (r1 + s.band - 1) / s.band;
  scratch->resize(row * h);
  for (int b = b0; b < b1; ++b) {
    const size_t n = row * std::min(s.band, h - b * s.band);
    const size_t got =
        ZSTD_decompressDCtx(dctx, scratch->data() + b * s.band * row, n,
                            s.bytes.data() + s.offsets[b], s.offsets[b + 1] - s.offsets[b]);
    if (ZSTD_isError(got) || got != n) {
      std::fprintf(stderr, "zstd decode failed\n");
      std::exit(1);
    }
  }
  CropResizePixels(scratch->data(), w, h, c, out, out, false, dst, filter);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: mm_raw_crop_layout_bench SET_DIR [N=4000] [SIZE=224] [ROUNDS=5] "
                 "[LEVEL=-1] [ONLY]\n");
    return 2;
  }
  const int n = argc > 2 ? std::stoi(argv[2]) : 4000;
  const int out = argc > 3 ? std::stoi(argv[3]) : 224;
  const int rounds = argc > 4 ? std::stoi(argv[4]) : 5;
  const int level = argc > 5 ? std::stoi(argv[5]) : -1;
  std::string only = argc > 6 ? argv[6] : "";
  const char* only_filter = std::getenv("MM_BENCH_FILTER");  // lanczos | bilinear: that one only
  auto set = mm::reader::ShardSet::Open(argv[1]);
  if (!set.ok()) {
    std::fprintf(stderr, "%s\n", set.status().ToString().c_str());
    return 1;
  }
  const mm::reader::SetInfo& info = (*set)->info();
  if (info.image_codec == mm::format::ImageCodec::kJpeg) {
    std::fprintf(stderr, "%s: a jpeg set; this benchmark needs a raw one\n", argv[1]);
    return 1;
  }
  const int w = info.image_width, h = info.image_height;
  const int64_t images = std::min<int64_t>((*set)->num_samples(), 2048);
  const int bands[] = {0, h, 8, 16, 32};  // none, whole frame, row bands
  const char* names[] = {"none", "zstd", "bands-8", "bands-16", "bands-32"};
  constexpr int kCandidates = 5;
  std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  std::vector<std::vector<Stored>> stored(kCandidates);
  std::vector<double> bytes(kCandidates, 0.0);
  std::vector<uint8_t> pixels(static_cast<size_t>(w) * h * 3);
  for (int64_t i = 0; i < images; ++i) {
    mm::Status st = (*set)->ReadImage(i, pixels.data());
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
    for (int k = 0; k < kCandidates; ++k) {
      if (!only.empty() && only != names[k]) continue;
      stored[k].push_back(Compress(pixels, w, h, bands[k], level, cctx.get()));
      bytes[k] += static_cast<double>(stored[k].back().bytes.size());
    }
  }
  // The crops: the loader's torchvision windows, one per (image, draw).
  std::vector<std::pair<int64_t, CropWindow>> crops;
  mm::reader::internal::CounterRng rng(12345);
  for (int i = 0; i < n; ++i) {
    crops.emplace_back(i % images, mm::reader::internal::RandomResizedCrop(w, h, {}, &rng));
  }
  std::vector<uint8_t> dst(static_cast<size_t>(out) * out * 3), scratch;
  const Filter filters[] = {Filter::kLanczos3, Filter::kBilinear};
  std::vector<double> cpu[kCandidates][2];
  for (int r = 0; r < rounds; ++r) {
    for (int f = 0; f < 2; ++f) {
      if (only_filter && std::string(only_filter) != (f == 0 ? "lanczos" : "bilinear")) {
        for (auto& c : cpu) c[f].push_back(0.0);
        continue;
      }
      for (int k = 0; k < kCandidates; ++k) {
        const int kk = (r % 2 == 0) ? k : kCandidates - 1 - k;  // alternate the order
        if (!only.empty() && only != names[kk]) {
          cpu[kk][f].push_back(0.0);
          continue;
        }
        const double c0 = CpuSeconds();
        for (const auto& [i, c] : crops) {
          Crop(stored[kk][i], w, h, c, out, filters[f], dctx.get(), &scratch, dst.data());
        }
        cpu[kk][f].push_back((CpuSeconds() - c0) * 1e3 / static_cast<double>(crops.size()));
      }
    }
  }
  std::printf(
      "%s: %lld images of %dx%d, %d random-resized crops to %dx%d, zstd level %d, "
      "median of %d rounds, one thread\n",
      argv[1], static_cast<long long>(images), w, h, n, out, out, level, rounds);
  std::printf("%-10s %14s %8s %22s %22s\n", "layout", "bytes/image", "ratio", "CPU-ms/crop lanczos",
              "CPU-ms/crop bilinear");
  for (int k = 0; k < kCandidates; ++k) {
    std::printf("%-10s %14.0f %8.3f %22.4f %22.4f\n", names[k], bytes[k] / images,
                bytes[0] / bytes[k], Median(cpu[k][0]), Median(cpu[k][1]));
  }
  return 0;
}
