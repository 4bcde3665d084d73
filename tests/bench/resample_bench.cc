// resample_bench: mmpack's hand-written resampler (mm/internal/resample.h, ResizeLanczos3)
// against libvips' vips_resize, re-measured in the same run on the same pixels. mmpack keeps
// its own resampler only because it is faster on what `mmpack build` resizes; this
// says by how much, today, on this machine.
//
// Input: every JPEG of DIR (default: $MM_SHARED_DIR/data/coco-cc/images), decoded by libvips
// at the shrink-on-load mmpack's PlanFit picks for SIZE x SIZE center-crop (so the sizes are
// the ones the build resizes: about 320x240 -> 299x224 for a COCO photo at 224), into memory.
// Then, one thread (vips_concurrency_set(1), as mmpack runs it), REPEATS rounds, each resizing
// every image once with each method, the order of the methods alternating per round:
//   vips_resize   vips_resize(kernel lanczos3) of the whole image to PlanFit's resize size,
//                 written to memory (libvips 8.14 defaults, gap 2: a box pre-shrink where the
//                 factor allows one; what a caller of libvips gets);
//   vips_exact    the same with gap 0: Lanczos-3 all the way, the same filter as mmpack's;
//   mmpack        ResizeLanczos3 of the whole image to the same size (the AVX2 kernel where the
//                 CPU has it);
//   mmpack_window ResizeLanczos3 of only the window a center-crop keeps (what the build does).
// Prints one JSON object: images, repeats, ms per image of each method (wall time, steady
// clock), and the ratios vips_resize / mmpack, vips_exact / mmpack and vips_resize /
// mmpack_window (above 1: mmpack is faster). Not a test: nothing is asserted.
//
// Usage: mm_resample_bench [DIR] [SIZE=224] [REPEATS=20]
#include <vips/vips.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "image/fit.h"
#include "mm/internal/resample.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Decoded {
  std::vector<uint8_t> pixels;  // [height, width, bands] uint8
  int width = 0, height = 0, bands = 0;
  mm::pack::FitPlan plan;
};

struct VipsUnref {
  void operator()(VipsImage* image) const { g_object_unref(image); }
};
using VipsPtr = std::unique_ptr<VipsImage, VipsUnref>;

// `path` decoded at the shrink-on-load PlanFit picks, or an empty Decoded.
Decoded Load(const fs::path& path, int size) {
  Decoded d;
  VipsPtr header(vips_image_new_from_file(path.c_str(), nullptr));
  if (!header) return d;
  d.plan =
      mm::pack::PlanFit(vips_image_get_width(header.get()), vips_image_get_height(header.get()),
                        /*orientation=*/1, size, size, mm::format::ResizeMode::kCenterCrop);
  VipsPtr image(vips_image_new_from_file(path.c_str(), "shrink", d.plan.shrink, nullptr));
  size_t bytes = 0;
  void* mem = image ? vips_image_write_to_memory(image.get(), &bytes) : nullptr;
  if (mem == nullptr) return d;
  d.width = vips_image_get_width(image.get());
  d.height = vips_image_get_height(image.get());
  d.bands = vips_image_get_bands(image.get());
  d.pixels.assign(static_cast<uint8_t*>(mem), static_cast<uint8_t*>(mem) + bytes);
  g_free(mem);
  return d;
}

// vips_resize of `d` to the plan's resize size, into memory; `gap` 2.0 is libvips' default.
void VipsResize(const Decoded& d, double gap) {
  VipsPtr in(vips_image_new_from_memory(d.pixels.data(), d.pixels.size(), d.width, d.height,
                                        d.bands, VIPS_FORMAT_UCHAR));
  VipsImage* out = nullptr;
  const double hscale = static_cast<double>(d.plan.need_w) / d.width;
  const double vscale = static_cast<double>(d.plan.need_h) / d.height;
  if (vips_resize(in.get(), &out, hscale, "vscale", vscale, "kernel", VIPS_KERNEL_LANCZOS3, "gap",
                  gap, nullptr) != 0) {
    std::cerr << "vips_resize: " << vips_error_buffer() << std::endl;
    std::exit(1);
  }
  VipsPtr owner(out);
  size_t bytes = 0;
  g_free(vips_image_write_to_memory(out, &bytes));
}

void MmpackResize(const Decoded& d, bool window, std::vector<uint8_t>* out) {
  const mm::pack::FitPlan& p = d.plan;
  mm::image::ResizeLanczos3(d.pixels.data(), d.width, d.height, d.width * d.bands, d.bands,
                            p.need_w, p.need_h, window ? p.win_x : 0, window ? p.win_y : 0,
                            window ? p.win_w : static_cast<int>(p.need_w),
                            window ? p.win_h : static_cast<int>(p.need_h), out);
}

}  // namespace

int main(int argc, char** argv) {
  if (VIPS_INIT(argv[0]) != 0) return 1;
  vips_concurrency_set(1);
  vips_cache_set_max(0);
  const char* shared = std::getenv("MM_SHARED_DIR");
  const fs::path dir =
      argc > 1 ? fs::path(argv[1])
               : fs::path(shared ? shared : MM_SHARED_DIR) / "data" / "coco-cc" / "images";
  const int size = argc > 2 ? std::stoi(argv[2]) : 224;
  const int repeats = argc > 3 ? std::stoi(argv[3]) : 20;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".jpg") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Decoded> images;
  for (const fs::path& f : files) {
    Decoded d = Load(f, size);
    if (!d.pixels.empty()) images.push_back(std::move(d));
  }
  if (images.empty()) {
    std::cerr << "resample_bench: no JPEG decoded in " << dir << std::endl;
    return 1;
  }
  std::vector<uint8_t> out;
  const std::vector<std::function<void(const Decoded&)>> methods = {
      [](const Decoded& d) { VipsResize(d, 2.0); },
      [](const Decoded& d) { VipsResize(d, 0.0); },
      [&](const Decoded& d) { MmpackResize(d, false, &out); },
      [&](const Decoded& d) { MmpackResize(d, true, &out); },
  };
  std::vector<double> seconds(methods.size(), 0.0);
  for (int r = 0; r < repeats; ++r) {
    for (size_t k = 0; k < methods.size(); ++k) {
      const size_t m = r % 2 == 0 ? k : methods.size() - 1 - k;  // alternate the order
      const auto t0 = Clock::now();
      for (const Decoded& d : images) methods[m](d);
      seconds[m] += std::chrono::duration<double>(Clock::now() - t0).count();
    }
  }
  const double n = static_cast<double>(images.size()) * repeats;
  auto ms = [&](size_t m) { return seconds[m] * 1e3 / n; };
  std::printf(
      "{\"images\": %zu, \"repeats\": %d, \"size\": %d, \"avx2\": %s, "
      "\"ms_per_image\": {\"vips_resize\": %.4f, \"vips_exact\": %.4f, \"mmpack\": %.4f, "
      "\"mmpack_window\": %.4f}, \"ratio_vips_resize_over_mmpack\": %.2f, "
      "\"ratio_vips_exact_over_mmpack\": %.2f, \"ratio_vips_resize_over_mmpack_window\": %.2f}\n",
      images.size(), repeats, size, mm::image::ResampleHasAvx2() ? "true" : "false", ms(0), ms(1),
      ms(2), ms(3), ms(0) / ms(2), ms(1) / ms(2), ms(0) / ms(3));
  vips_shutdown();
  return 0;
}
