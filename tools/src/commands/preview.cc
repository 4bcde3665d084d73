// preview.cc: `mmpack preview OUT -o sheet.png` (commands.h): a contact sheet of samples read
// through the reader (the pixels a training batch gets), each with its key and first caption
// under it (image/contact_sheet.h), and one line per sample on `out`:
//   "sample I key KEY at X,Y" (the image's top-left corner in the sheet, pixels).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "commands/caption_text.h"
#include "commands/commands.h"
#include "set/output_dir.h"
#include "image/contact_sheet.h"
#include "mm/reader.h"

namespace mm::pack {
namespace {

// `count` distinct sample indices of [0, n): the first ones, or a seeded draw (a partial
// Fisher-Yates shuffle driven by mt19937_64, whose output the C++ standard fixes, so the same
// seed picks the same samples on every platform), in drawn order.
std::vector<int64_t> PickSamples(int64_t n, int64_t count, bool first, uint64_t seed) {
  count = std::min(count, n);
  std::vector<int64_t> picked;
  if (first) {
    for (int64_t i = 0; i < count; ++i) picked.push_back(i);
    return picked;
  }
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng() % static_cast<uint64_t>(n - i));
    std::swap(all[i], all[j]);
    picked.push_back(all[i]);
  }
  return picked;
}

// "key\nfirst caption" (the caption shortened to about the label's room).
std::string Label(const mm::reader::ShardSet& set, int64_t i, int width, int lines) {
  std::string label(set.Key(i));
  auto captions = ReadSampleCaptions(set, i);
  if (!captions.ok() || captions->empty()) return label + "\n(caption unreadable)";
  std::string caption = (*captions)[0];
  // About width/6 characters a line at 10 px; the first line holds the key.
  const size_t room = static_cast<size_t>(std::max(1, width / 6)) * (lines - 1);
  if (caption.size() > room) {
    size_t cut = room;
    while (cut > 0 && (static_cast<unsigned char>(caption[cut]) & 0xC0) == 0x80) --cut;
    caption = caption.substr(0, cut) + "...";
  }
  return label + "\n" + caption;
}

}  // namespace

Status RunPreview(const PreviewOptions& o, std::ostream& out) {
  MM_RETURN_NOT_OK(RefuseUrlOutput(o.output_png, "-o"));
  MM_ASSIGN_OR_RETURN(auto set, mm::reader::ShardSet::Open(o.dir));
  const auto& info = set->info();
  if (o.count < 1) return Status::InvalidArgument("--count must be >= 1");
  const std::vector<int64_t> picked = PickSamples(set->num_samples(), o.count, o.first, o.seed);
  constexpr int kLines = 5;
  std::vector<std::vector<uint8_t>> pixels(picked.size());
  std::vector<SheetCell> cells(picked.size());
  for (size_t k = 0; k < picked.size(); ++k) {
    // The loader's default view: the stored image, or (keep-ratio sets) its centred window of
    // the set's size.
    int h = 0, w = 0;
    MM_RETURN_NOT_OK(mm::reader::LoadSampleImage(*set, mm::reader::LoaderOptions{}, 0, picked[k],
                                                 &pixels[k], &h, &w));
    cells[k] = {pixels[k].data(), info.image_width, info.image_height,
                Label(*set, picked[k], info.image_width, kLines)};
  }
  SheetLayout layout;
  MM_RETURN_NOT_OK(WriteContactSheet(cells, o.columns, kSheetFont, o.output_png, &layout, kLines));
  for (size_t k = 0; k < picked.size(); ++k) {
    out << "sample " << picked[k] << " key " << set->Key(picked[k]) << " at " << layout.x[k] << ","
        << layout.y[k] << "\n";
  }
  out << "wrote " << o.output_png << " (" << layout.width << "x" << layout.height << ", "
      << picked.size() << " samples)\n";
  return Status::OK();
}

}  // namespace mm::pack
