// libFuzzer target: index.json parsing (mm::reader::internal::ParseIndex) on arbitrary bytes.
// Build with clang and -DMM_FUZZ=ON (tests/reader/CMakeLists.txt); run e.g.
//   BUILD/bin/mm_reader_fuzz_index -max_total_time=60 CORPUS_DIR
// Checks: no crash, no sanitizer report, and any accepted index is self-consistent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "mm/internal/index_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = mm::reader::internal::ParseIndex(
      std::string_view(reinterpret_cast<const char*>(data), size), "/fuzz");
  if (r.ok()) {
    int64_t samples = 0;
    for (const auto& s : r->shards) {
      if (s.samples < 0 || s.captions < s.samples || s.file.find('/') != std::string::npos) {
        std::abort();
      }
      samples += s.samples;
    }
    if (samples != r->num_samples || r->image_height <= 0 || r->image_width <= 0) std::abort();
  }
  return 0;
}
