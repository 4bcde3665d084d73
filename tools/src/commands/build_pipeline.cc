// build_pipeline.cc: see build_pipeline.h.
#include "commands/build_pipeline.h"

#include <tbb/global_control.h>
#include <tbb/parallel_pipeline.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "commands/progress.h"
#include "mm/internal/file.h"

namespace mm::pack {
namespace {

// One sample travelling through the pipeline.
struct Item {
  RawSample* raw = nullptr;
  bool have_bytes = false;  // read by the source stage (tar members)
  Status read_status;
  std::string bytes;
  // results
  bool ok = false;
  EncodedSample encoded;
  DropEntry drop;
  int64_t truncated = 0;
  Status fatal;  // a failure that stops the build (compression, tokenizer internals)
};

// The most bytes read of one image file or tar member: what an uncompressed 16-bit RGBA
// image of --max-pixels takes (8 bytes a pixel) plus 64 MiB of metadata, and at least 1 GiB.
// A larger file cannot be an image mmpack would keep; reading it (a 50 GB sparse file named
// .jpg) would exhaust memory. Such a file is dropped as file_too_large.
int64_t MaxImageFileBytes(int64_t max_pixels) {
  constexpr int64_t kFloor = int64_t{1} << 30, kSlack = int64_t{64} << 20;
  if (max_pixels <= 0 || max_pixels > (INT64_MAX - kSlack) / 8) return INT64_MAX;
  return std::max(kFloor, 8 * max_pixels + kSlack);
}

const char* ReadFailureReason(const Status& st) {
  if (st.IsNotFound()) return "missing_file";
  if (st.code() == StatusCode::kOutOfRange) return "file_too_large";
  return "unreadable";
}

// The processor stage: bytes -> image -> token ids -> compressed chunk, or a drop.
void ProcessItem(Item* item, const BuildOptions& o, const ImageOptions& image_options,
                 const Tokenizer& tokenizer) {
  RawSample& raw = *item->raw;
  auto drop = [&](const char* reason, std::string detail) {
    item->ok = false;
    item->drop = {raw.source, raw.key, reason, std::move(detail)};
  };
  if (!item->have_bytes) {
    item->read_status = ReadRegularFile(raw.path, &item->bytes, MaxImageFileBytes(o.max_pixels));
  }
  if (!item->read_status.ok()) {
    drop(ReadFailureReason(item->read_status), item->read_status.message());
    return;
  }
  ProcessedImage image;
  ImageFailure failure;
  if (!ProcessImage(item->bytes, image_options, &image, &failure)) {
    drop(failure.reason.c_str(), failure.detail);
    return;
  }
  std::string().swap(item->bytes);
  EncodedSample& e = item->encoded;
  e.tokens.reserve(raw.captions.size());
  for (const std::string& caption : raw.captions) {
    auto t = tokenizer.Encode(caption, o.max_tokens);
    if (!t.ok()) {
      item->fatal = t.status().WithContext("sample " + raw.key);
      return;
    }
    if (t->truncated) ++item->truncated;
    e.tokens.push_back(std::move(t->ids));
  }
  auto chunk =
      CompressImage(image.pixels.data(), image.pixels.size(), o.compression, o.compression_level);
  if (!chunk.ok()) {
    item->fatal = chunk.status().WithContext("compressing sample " + raw.key);
    return;
  }
  e.image_chunk = chunk.MoveValue();
  e.key = std::move(raw.key);
  e.source = std::move(raw.source);
  e.original_width = image.original_width;
  e.original_height = image.original_height;
  std::copy(image.valid_box, image.valid_box + 4, e.valid_box);
  e.captions = std::move(raw.captions);
  item->ok = true;
}

class Pipeline {
 public:
  Pipeline(std::vector<RawSample>* samples, bool from_tar, const BuildOptions& o,
           const ImageOptions& image_options, const Tokenizer& tokenizer, ShardWriter* writer,
           BuildReport* report)
      : samples_(*samples),
        from_tar_(from_tar),
        o_(o),
        image_options_(image_options),
        tokenizer_(tokenizer),
        writer_(writer),
        report_(report),
        progress_(static_cast<int64_t>(samples->size()), o.quiet) {}

  Status Run() {
    const int threads =
        o_.threads > 0 ? o_.threads : std::max(1u, std::thread::hardware_concurrency());
    tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, threads);
    tbb::parallel_pipeline(
        static_cast<size_t>(4 * threads),
        tbb::make_filter<void, Item*>(tbb::filter_mode::serial_in_order,
                                      [this](tbb::flow_control& fc) { return Source(fc); }) &
            tbb::make_filter<Item*, Item*>(tbb::filter_mode::parallel,
                                           [this](Item* item) { return Process(item); }) &
            tbb::make_filter<Item*, void>(tbb::filter_mode::serial_in_order,
                                          [this](Item* item) { Sink(item); }));
    progress_.Finish();
    return fatal_;
  }

 private:
  // The next sample, or nullptr (fc.stop()) at the end or once the sink has failed.
  Item* Source(tbb::flow_control& fc) {
    if (next_ >= samples_.size() || stop_.load(std::memory_order_acquire)) {
      fc.stop();
      return nullptr;
    }
    auto* item = new Item;
    item->raw = &samples_[next_++];
    if (from_tar_) {
      item->read_status =
          tar_reader_.Read(*item->raw, &item->bytes, MaxImageFileBytes(o_.max_pixels));
      item->have_bytes = true;
    }
    return item;
  }

  Item* Process(Item* item) {
    ProcessItem(item, o_, image_options_, tokenizer_);
    return item;
  }

  // Writes or reports one sample, in input order; a fatal failure stops the pipeline.
  void Sink(Item* item) {
    std::unique_ptr<Item> owner(item);
    if (!fatal_.ok()) return;
    if (!item->fatal.ok()) return Stop(item->fatal);
    if (item->ok) {
      report_->written_captions += static_cast<int64_t>(item->encoded.captions.size());
      report_->truncated += item->truncated;
      Status st = writer_->Add(std::move(item->encoded));
      if (!st.ok()) return Stop(st);
      ++report_->written;
    } else {
      report_->dropped.push_back(std::move(item->drop));
      ++dropped_;
    }
    progress_.Update(report_->written + dropped_, dropped_);
    // Free the sample's text as soon as it is written.
    RawSample().captions.swap(item->raw->captions);
  }

  // `fatal_` is written only by the sink; the source runs on another TBB thread, so it reads
  // only `stop_`, which is set (release) after `fatal_` is written.
  void Stop(Status st) {
    fatal_ = std::move(st);
    stop_.store(true, std::memory_order_release);
  }

  std::vector<RawSample>& samples_;
  const bool from_tar_;
  const BuildOptions& o_;
  const ImageOptions& image_options_;
  const Tokenizer& tokenizer_;
  ShardWriter* writer_;
  BuildReport* report_;
  Progress progress_;
  size_t next_ = 0;         // source: the next sample
  ImageReader tar_reader_;  // source: reads tar members in one pass
  int64_t dropped_ = 0;     // sink: samples the pipeline dropped
  Status fatal_;            // sink
  std::atomic<bool> stop_{false};
};

}  // namespace

Status RunPipeline(std::vector<RawSample>* samples, bool from_tar, const BuildOptions& o,
                   const ImageOptions& image_options, const Tokenizer& tokenizer,
                   ShardWriter* writer, BuildReport* report) {
  Pipeline pipeline(samples, from_tar, o, image_options, tokenizer, writer, report);
  return pipeline.Run();
}

}  // namespace mm::pack
