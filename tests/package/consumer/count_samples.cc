// count_samples SET: opens a shard set with the installed reader (mmpack::reader), reads one
// epoch of batches and prints "samples N images M version V" (M: the images the epoch gave).
#include <cstdio>
#include <memory>
#include <string>

#include "mm/reader.h"
#include "mm/version.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: count_samples SET\n");
    return 2;
  }
  auto set = mm::reader::ShardSet::Open(argv[1]);
  if (!set.ok()) {
    std::fprintf(stderr, "count_samples: %s\n", set.status().ToString().c_str());
    return 1;
  }
  mm::reader::LoaderOptions options;
  options.batch_size = 3;
  options.drop_last = false;
  auto loader = mm::reader::Loader::Create(*set, options);
  if (!loader.ok()) {
    std::fprintf(stderr, "count_samples: %s\n", loader.status().ToString().c_str());
    return 1;
  }
  long images = 0;
  for (;;) {
    auto batch = (*loader)->Next();
    if (!batch.ok()) {
      std::fprintf(stderr, "count_samples: %s\n", batch.status().ToString().c_str());
      return 1;
    }
    if (*batch == nullptr) break;
    images += static_cast<long>((*batch)->size);
  }
  std::printf("samples %lld images %ld version %s\n", static_cast<long long>((*set)->num_samples()),
              images, std::string(mm::kVersion).c_str());
  return 0;
}
