// build_decode_floor: the decode floor of `mmpack build` (issue 2, benchmark baseline (b)).
//
// Decodes each JPEG listed in LIST (one path a line) with libjpeg-turbo's TurboJPEG API
// (tjDecompress2 to packed RGB), one thread, nothing else: at the smallest DCT scale among
// 1/8, 1/4, 1/2 and 1 whose scaled short side still covers TARGET pixels (the shrink-on-load
// a 224 px centre crop can use). Not the other M/8 scales libjpeg-turbo offers: their inverse
// DCTs have no SIMD code, and on the expanded coco-cc set 5/8, 6/8 and 7/8 decode slower than
// 8/8 (1.26, 1.39, 1.70 against 1.14 CPU ms per image; 4/8: 0.92; entropy decoding, which no
// scale avoids, is 0.68 of those ms), so they cannot lower the floor or mmpack. Files are read into memory first; only decoding is timed, in
// this process's CPU time (CLOCK_PROCESS_CPUTIME_ID), so the floor is as low as it can be.
//
// Usage: mm_decode_floor LIST [TARGET=224] [REPEATS=1]
// Prints one JSON object: images, failed, cpu_ms_per_image, wall_s, megapixels_decoded, and
// how many images each scale decoded.
#include <time.h>
#include <turbojpeg.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

// Owner of a TurboJPEG decompressor handle.
struct TjDeleter {
  void operator()(void* handle) const { tjDestroy(static_cast<tjhandle>(handle)); }
};
using TjHandle = std::unique_ptr<void, TjDeleter>;

double Seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The smallest of 1/8, 1/4, 1/2, 1 at which min(width, height) scaled (rounded up, as
// libjpeg does) is still >= target. Images whose short side is already below target get 1.
tjscalingfactor PickScale(int width, int height, int target) {
  const tjscalingfactor kScales[] = {{1, 8}, {1, 4}, {1, 2}, {1, 1}};
  for (const tjscalingfactor& s : kScales) {
    if (TJSCALED(width, s) >= target && TJSCALED(height, s) >= target) return s;
  }
  return {1, 1};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: mm_decode_floor LIST [TARGET=224] [REPEATS=1]" << std::endl;
    return 2;
  }
  const int target = argc > 2 ? std::stoi(argv[2]) : 224;
  const int repeats = argc > 3 ? std::stoi(argv[3]) : 1;

  std::vector<std::string> paths;
  {
    std::ifstream list(argv[1]);
    if (!list) {
      std::cerr << "mm_decode_floor: cannot read " << argv[1] << std::endl;
      return 1;
    }
    for (std::string line; std::getline(list, line);) {
      if (!line.empty()) paths.push_back(line);
    }
  }
  std::vector<std::vector<unsigned char>> files;
  files.reserve(paths.size());
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::cerr << "mm_decode_floor: cannot read " << path << std::endl;
      return 1;
    }
    files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  TjHandle tj(tjInitDecompress());
  if (!tj) {
    std::cerr << "mm_decode_floor: tjInitDecompress: " << tjGetErrorStr2(nullptr) << std::endl;
    return 1;
  }
  std::vector<unsigned char> rgb;  // [height, width, 3] uint8, reused
  std::map<std::string, int64_t> by_scale;
  int64_t decoded = 0, failed = 0;
  double megapixels = 0;
  const double wall0 = Seconds(CLOCK_MONOTONIC), cpu0 = Seconds(CLOCK_PROCESS_CPUTIME_ID);
  for (int r = 0; r < repeats; ++r) {
    for (const auto& file : files) {
      int width = 0, height = 0, subsamp = 0, colorspace = 0;
      if (tjDecompressHeader3(tj.get(), file.data(), file.size(), &width, &height, &subsamp,
                              &colorspace) != 0) {
        ++failed;
        continue;
      }
      const tjscalingfactor s = PickScale(width, height, target);
      const int w = TJSCALED(width, s), h = TJSCALED(height, s);
      rgb.resize(static_cast<size_t>(w) * h * 3);
      if (tjDecompress2(tj.get(), file.data(), file.size(), rgb.data(), w, /*pitch=*/0, h, TJPF_RGB,
                        /*flags=*/0) != 0) {
        ++failed;
        continue;
      }
      ++decoded;
      megapixels += 1e-6 * w * h;
      ++by_scale[std::to_string(s.num) + "/" + std::to_string(s.denom)];
    }
  }
  const double cpu = Seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  const double wall = Seconds(CLOCK_MONOTONIC) - wall0;

  std::printf(
      "{\"images\": %lld, \"failed\": %lld, \"cpu_ms_per_image\": %.4f, \"wall_s\": %.4f, "
      "\"megapixels_decoded\": %.2f, \"by_scale\": {",
      static_cast<long long>(decoded), static_cast<long long>(failed),
      decoded ? 1e3 * cpu / static_cast<double>(decoded) : 0.0, wall, megapixels);
  bool first = true;
  for (const auto& [scale, n] : by_scale) {
    std::printf("%s\"%s\": %lld", first ? "" : ", ", scale.c_str(), static_cast<long long>(n));
    first = false;
  }
  std::printf("}}\n");
  return failed ? 1 : 0;
}
