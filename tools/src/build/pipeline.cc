// pipeline.cc: see build_pipeline.h.
#include "build/pipeline.h"

#include <tbb/global_control.h>
#include <tbb/parallel_pipeline.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <future>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <utility>

#include "build/progress.h"
#include "curate/dedup.h"
#include "curate/filters.h"
#include "ingest/remote_fetcher.h"
#include "mm/internal/file.h"
#include "text/normalize.h"

namespace mm::pack {
namespace {

// One sample travelling through the pipeline: its input, and what the stages make of it
// (ProcessedSample's fields, which the consumer takes).
struct Item : ProcessedSample {
  RawSample sample;                // read from the list by the source stage
  RawSample* raw = &sample;
  bool have_bytes = false;  // read by the source stage (tar members) or fetched (URLs)
  Status read_status;
  std::future<Status> fetch;  // an image at a URL: its GET, started by the source stage
  std::string bytes;
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

// Samples the source reads ahead of the pipeline, a thread: the GETs of images at URLs in flight
// while the threads decode (a store's latency over a decode's time: 50 ms over 5 ms, twice).
constexpr int kAheadPerThread = 16;

// When the build decides that the store, not the images, has failed (its credentials expired,
// it went down): kStoreDownAfter GETs of images at URLs failed in a row, after their retries,
// and none answered for kStoreDownSeconds (a 404 or any answer resets both). Dropping every
// remaining image would publish a fraction of the set after hours of retries; failing names
// the cause and publishes nothing. A blip shorter than the window drops the images it failed
// (report.json names them) and the build goes on. More GETs than are ever in flight at once.
constexpr int kStoreDownAfter = 64;
constexpr double kStoreDownSeconds = 30;

// The pipeline's threads: --threads, else one a core.
int BuildThreads(const BuildOptions& o) {
  return o.threads > 0 ? o.threads
                       : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

const char* ReadFailureReason(const Status& st) {
  if (st.IsNotFound()) return "missing_file";
  if (st.code() == StatusCode::kOutOfRange) return "file_too_large";
  return "unreadable";
}

// The sample's captions, normalised (--lowercase, --normalize) and tokenized, into
// item->encoded; those --min-tokens or --drop-long-captions refuse go to
// item->dropped_captions. False when the item is finished: dropped (no caption left) or fatal.
bool TokenizeCaptions(Item* item, const BuildOptions& o, const Tokenizer* tokenizer) {
  RawSample& raw = *item->raw;
  EncodedSample& e = item->encoded;
  e.tokens.reserve(raw.captions.size());
  if (tokenizer == nullptr) {  // --tokenizer none: captions stored as text, no token ids
    for (std::string& caption : raw.captions) {
      item->unk.push_back(0);
      e.tokens.emplace_back();
      e.captions.push_back(std::move(caption));
    }
    return true;
  }
  const char* first_reason = nullptr;
  for (size_t c = 0; c < raw.captions.size(); ++c) {
    auto text = NormalizeForTokenizer(raw.captions[c], o.text);
    auto t = text.ok() ? tokenizer->Encode(*text, o.max_tokens)
                       : Result<TokenizedCaption>(text.status());
    if (!t.ok()) {
      item->fatal = t.status().WithContext("sample " + raw.key);
      return false;
    }
    if (const char* why = CheckCaptionLength(t->pieces, t->truncated, o.filters)) {
      if (first_reason == nullptr) first_reason = why;
      item->dropped_captions.push_back({raw.source, raw.key, static_cast<int64_t>(c), why});
      continue;
    }
    if (t->truncated) ++item->truncated;
    item->unk.push_back(t->unk);
    e.tokens.push_back(std::move(t->ids));
    e.captions.push_back(std::move(raw.captions[c]));
  }
  if (e.captions.empty()) {
    item->ok = false;
    item->drop = {raw.source, raw.key, first_reason,
                  std::to_string(raw.captions.size()) +
                      " caption(s), none within the caption "
                      "length filters"};
    return false;
  }
  return true;
}

// After ProcessItem threw: whatever it made of the item is freed, and the item is a drop.
void DropAfterException(Item* item, const char* reason, std::string detail) {
  std::string().swap(item->bytes);
  item->encoded = EncodedSample();
  item->unk.clear();
  item->dropped_captions.clear();
  item->ok = false;
  item->drop = {item->raw->source, item->raw->key, reason, std::move(detail)};
}

// The processor stage: bytes -> image -> token ids -> compressed chunk or JPEG, or a drop.
void ProcessItem(Item* item, const BuildOptions& o, const ImageOptions& image_options,
                 const Tokenizer* tokenizer) {
  RawSample& raw = *item->raw;
  auto drop = [&](const char* reason, std::string detail) {
    item->ok = false;
    item->drop = {raw.source, raw.key, reason, std::move(detail)};
  };
  item->source_stamp = SourceStamp(raw);  // before the read: a change after it is seen later
  if (!item->have_bytes) {
    item->read_status = ReadImageFile(raw.path, &item->bytes, MaxImageFileBytes(o.max_pixels));
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
  std::string detail;
  if (const char* why =
          CheckSourceSize(image.original_width, image.original_height, o.filters, &detail)) {
    drop(why, std::move(detail));
    return;
  }
  const bool jpeg = o.image_codec == format::ImageCodec::kJpeg;
  // --dedup hashes the pixels; an --append to a JPEG set hashes them as stored (after the
  // JPEG round trip, below), the form in which OUT's images can be read back and compared.
  const bool hash_stored = o.filters.dedup != DedupMode::kOff && o.append && jpeg;
  if (o.filters.dedup != DedupMode::kOff && !hash_stored) {
    item->pixel_hash = PixelHash(image.pixels.data(), image.pixels.size());
    item->perceptual_hash = PerceptualHash(image.pixels.data(), image.width, image.height);
  }
  if (!TokenizeCaptions(item, o, tokenizer)) return;
  EncodedSample& e = item->encoded;
  // Raw and uncompressed (the default): the pixels are the chunk, moved rather than copied
  // (saves a 150 KB allocation and copy a sample at 224 px). The pixel hashes
  // of --dedup were taken above.
  const bool raw_none = !jpeg && o.compression == format::Codec::kNone;
  Result<std::vector<uint8_t>> chunk =
      jpeg ? EncodeJpeg(image.pixels.data(), image.width, image.height, o.jpeg_quality)
      : raw_none ? Result<std::vector<uint8_t>>(std::move(image.pixels))
                 : CompressImage(image.pixels.data(), image.pixels.size(), o.compression,
                                 o.compression_level);
  if (!chunk.ok()) {
    item->fatal = chunk.status().WithContext("encoding sample " + raw.key);
    return;
  }
  if (hash_stored) {
    auto stored = DecodeStoredJpeg(*chunk, image.width, image.height);
    if (!stored.ok()) {
      item->fatal = stored.status().WithContext("sample " + raw.key);
      return;
    }
    item->pixel_hash = PixelHash(stored->data(), stored->size());
    item->perceptual_hash = PerceptualHash(stored->data(), image.width, image.height);
  }
  e.image_chunk = chunk.MoveValue();
  e.stored_width = image.width;
  e.stored_height = image.height;
  e.key = std::move(raw.key);
  e.source = std::move(raw.source);
  // --keep-fields: the kept values are the first entries of raw.fields (BuildOptions).
  for (size_t f = 0; f < o.keep_fields.size(); ++f) {
    FieldValue& v = raw.fields[f];
    e.metadata.push_back(
        {static_cast<mm::reader::MetadataValue::Type>(v.type), v.i, v.f, std::move(v.s), v.u()});
  }
  e.original_width = image.original_width;
  e.original_height = image.original_height;
  std::copy(image.valid_box, image.valid_box + 4, e.valid_box);
  item->ok = true;
}

class Pipeline {
 public:
  Pipeline(SampleList::Cursor cursor, const PipelineInput& in,
           const std::function<Status(ProcessedSample&&)>& consume)
      : cursor_(std::move(cursor)),
        end_(std::min(in.end, in.samples.size())),
        from_tar_(in.from_tar),
        o_(in.options),
        image_options_(in.image),
        tokenizer_(in.tokenizer),
        consume_(consume) {}
  ~Pipeline() { DropAhead(); }  // before fetcher_ goes

  Status Run() {
    const int threads = BuildThreads(o_);
    tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, threads);
    tbb::parallel_pipeline(
        static_cast<size_t>(4 * threads),
        tbb::make_filter<void, Item*>(tbb::filter_mode::serial_in_order,
                                      [this](tbb::flow_control& fc) { return Source(fc); }) &
            tbb::make_filter<Item*, Item*>(tbb::filter_mode::parallel,
                                           [this](Item* item) { return Process(item); }) &
            tbb::make_filter<Item*, void>(tbb::filter_mode::serial_in_order,
                                          [this](Item* item) { Consume(item); }));
    DropAhead();
    MM_RETURN_NOT_OK(source_error_);
    return fatal_;
  }

 private:
  // The next sample, or nullptr (fc.stop()) at the end or once the consumer has failed. Up to
  // ahead_limit_ samples are read from the list before they are handed on, so that the images at
  // URLs among them are fetched meanwhile (TBB calls this stage only when a thread is free).
  Item* Source(tbb::flow_control& fc) {
    while (ahead_.size() < ahead_limit_ && cursor_.position() < end_ && source_error_.ok()) {
      if (std::unique_ptr<Item> item = ReadItem()) ahead_.push_back(std::move(item));
    }
    if (ahead_.empty() || !source_error_.ok() || stop_.load(std::memory_order_acquire)) {
      fc.stop();
      return nullptr;
    }
    Item* item = ahead_.front().release();
    ahead_.pop_front();
    return item;
  }

  // The list's next sample, its image read (a tar member) or being fetched (a URL); null when
  // the list's file failed or ended early (source_error_).
  std::unique_ptr<Item> ReadItem() {
    auto item = std::make_unique<Item>();
    item->index = cursor_.position();
    auto more = cursor_.Next(&item->sample);
    if (!more.ok() || !*more) {
      source_error_ = more.ok() ? Status::Internal("the sample list ended early") : more.status();
      return nullptr;
    }
    if (from_tar_) {
      item->read_status =
          tar_reader_.Read(*item->raw, &item->bytes, MaxImageFileBytes(o_.max_pixels));
      item->have_bytes = true;
    } else if (IsRemoteUrl(item->raw->path)) {
      item->fetch = fetcher_.Fetch(item->raw->path, &item->bytes, MaxImageFileBytes(o_.max_pixels));
      item->have_bytes = true;
    }
    return item;
  }

  // Frees the items read ahead and never handed on (the pipeline stopped), once their fetches,
  // which write into them, are done.
  void DropAhead() {
    fetcher_.CancelQueued();  // no wait for GETs (each up to its retries) of samples never used
    for (std::unique_ptr<Item>& item : ahead_) {
      if (item->fetch.valid()) item->fetch.wait();
    }
    ahead_.clear();
  }

  // One sample never ends the build: an exception out of its processing (std::bad_alloc
  // above all) becomes its drop, naming it in report.json, and the pipeline goes on.
  Item* Process(Item* item) {
    try {
      if (item->fetch.valid()) {
        item->read_status = item->fetch.get();
        if (StoreDown(item)) return item;
      }
      ProcessItem(item, o_, image_options_, tokenizer_);
    } catch (const std::bad_alloc&) {
      DropAfterException(item, "out_of_memory", "memory ran out while processing this sample");
    } catch (const std::exception& e) {
      DropAfterException(item, "unreadable", std::string("internal error: ") + e.what());
    }
    return item;
  }

  // Counts the GETs that failed in a row (kStoreDownAfter, kStoreDownSeconds); true, with
  // item->fatal set, once they say that the store has failed.
  bool StoreDown(Item* item) {
    const Status& st = item->read_status;
    const int64_t now = NowNs();
    if (st.code() != StatusCode::kIOError) {
      failed_gets_in_a_row_.store(0, std::memory_order_relaxed);
      last_answer_ns_.store(now, std::memory_order_relaxed);
      return false;
    }
    const int n = failed_gets_in_a_row_.fetch_add(1, std::memory_order_relaxed) + 1;
    const double silent = static_cast<double>(now - last_answer_ns_.load()) / 1e9;
    if (n < kStoreDownAfter || silent < kStoreDownSeconds) return false;
    item->fatal = Status::IOError(
        "the store stopped answering: " + std::to_string(n) +
        " images at URLs in a row failed after their retries, none answered for " +
        std::to_string(static_cast<int>(silent)) + " s (the last: " + st.message() +
        "); the build stops and publishes nothing: run it again once the store answers");
    return true;
  }

  static int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // Hands one sample to the consumer, in input order; a fatal failure stops the pipeline.
  void Consume(Item* item) {
    std::unique_ptr<Item> owner(item);
    if (!fatal_.ok()) return;
    if (!item->fatal.ok()) return Stop(item->fatal);
    if (Status st = consume_(std::move(*static_cast<ProcessedSample*>(item))); !st.ok()) {
      return Stop(st);
    }
  }

  // `fatal_` is written only by the consumer stage; the source runs on another TBB thread, so
  // it reads only `stop_`, which is set (release) after `fatal_` is written.
  void Stop(Status st) {
    fatal_ = std::move(st);
    stop_.store(true, std::memory_order_release);
  }

  SampleList::Cursor cursor_;  // source: the next sample
  const size_t end_;
  const bool from_tar_;
  const BuildOptions& o_;
  const ImageOptions& image_options_;
  const Tokenizer* tokenizer_;
  const std::function<Status(ProcessedSample&&)>& consume_;
  ImageReader tar_reader_;  // source: reads tar members in one pass
  // source: samples read ahead (kAheadPerThread a thread; tar members, whose bytes the source
  // reads itself, one at a time), and the GETs of their images at URLs
  // (no more than the GETs in flight at once: more would only hold fetched images in memory).
  const size_t ahead_limit_ =
      from_tar_ ? size_t{1} : static_cast<size_t>(std::min(64, kAheadPerThread * BuildThreads(o_)));
  RemoteFetcher fetcher_{std::min(64, kAheadPerThread * BuildThreads(o_))};
  std::deque<std::unique_ptr<Item>> ahead_;
  Status source_error_;  // source: the list could not be read
  Status fatal_;         // consumer
  std::atomic<bool> stop_{false};
  std::atomic<int> failed_gets_in_a_row_{0};  // processors: StoreDown
  std::atomic<int64_t> last_answer_ns_{NowNs()};  // processors: StoreDown
};

}  // namespace

struct SampleSink::State {
  State(const BuildOptions& o, const SinkTargets& t)
      : o(o),
        writer(t.writer),
        report(t.report),
        sink(*t.progress),
        checkpoints(t.checkpoints),
        base(t.base),
        first_written(t.report->written),
        first_dropped(t.progress->pipeline_dropped),
        progress(t.total, o.quiet) {
    if (o.filters.dedup != DedupMode::kOff) {
      duplicates = std::make_unique<DuplicateIndex>(
          o.filters.dedup == DedupMode::kNear ? o.filters.near_threshold : -1);
      if (base != nullptr) {  // OUT's images come first: positions [0, base->size())
        for (const KeptSample& k : *base) duplicates->Add(k.pixel_hash, k.perceptual_hash);
      }
      for (const KeptSample& k : sink.kept) duplicates->Add(k.pixel_hash, k.perceptual_hash);
    }
  }

  Status Add(ProcessedSample&& item) {
    if (item.ok && duplicates != nullptr) CheckDuplicate(&item);
    if (item.ok) {
      MM_RETURN_NOT_OK(writer->CloseIfNoRoom(item.encoded));
      MM_RETURN_NOT_OK(Checkpoint(item.index));
    }
    sink.sources = ChainSource(sink.sources, item.index, item.source_stamp);  // the next shard's
    for (DroppedCaption& d : item.dropped_captions) {
      report->dropped_captions.push_back(std::move(d));
    }
    if (item.ok) {
      const EncodedSample& e = item.encoded;
      if (duplicates != nullptr) {
        duplicates->Add(item.pixel_hash, item.perceptual_hash);
        sink.kept.push_back({e.key, item.pixel_hash, item.perceptual_hash});
      }
      report->written_captions += static_cast<int64_t>(e.captions.size());
      report->truncated += item.truncated;
      for (size_t c = 0; c < e.captions.size(); ++c) {
        report->stats.AddCaption(e.tokens[c].size(), item.unk[c], e.captions[c]);
      }
      report->stats.AddSample(e.captions.size(), e.original_width, e.original_height);
      report->stats.AddStoredImage(e.stored_width, e.stored_height, e.image_chunk.size());
      MM_RETURN_NOT_OK(writer->Add(std::move(item.encoded)));
      ++report->written;
      MM_RETURN_NOT_OK(Checkpoint(item.index + 1));
    } else {
      report->dropped.push_back(std::move(item.drop));
      ++sink.pipeline_dropped;
    }
    const int64_t dropped = sink.pipeline_dropped - first_dropped;
    progress.Update(report->written - first_written + dropped, dropped);
    return Status::OK();
  }

  // When the writer has closed a shard since the last call: the sink's progress, with
  // `next` the first sample not in it, saved as a checkpoint.
  Status Checkpoint(size_t next) {
    const std::vector<mm::reader::ShardEntry>& closed = writer->Closed();
    if (closed.size() == closed_seen) return Status::OK();
    for (; closed_seen < closed.size(); ++closed_seen) sink.shards.push_back(closed[closed_seen]);
    sink.next_sample = next;
    if (checkpoints != nullptr) MM_RETURN_NOT_OK(checkpoints->Save(*report, sink));
    sink.sources = 0;  // the samples of the next checkpoint start here
    return Status::OK();
  }

  // --dedup: the item becomes a drop when an earlier written sample has its pixels (or, for
  // near, its perceptual hash within the threshold); Add records its hashes when written.
  void CheckDuplicate(ProcessedSample* item) {
    bool exact = false;
    const int64_t earlier = duplicates->Find(item->pixel_hash, item->perceptual_hash, &exact);
    if (earlier < 0) return;
    const size_t in_base = base != nullptr ? base->size() : 0;
    const size_t at = static_cast<size_t>(earlier);
    const std::string first =
        at < in_base ? (*base)[at].key + " of OUT" : sink.kept[at - in_base].key;
    item->ok = false;
    item->drop = {std::move(item->encoded.source), std::move(item->encoded.key),
                  exact ? "duplicate_exact" : "duplicate_near",
                  exact ? "same pixels as sample " + first
                        : "perceptual hash within " + std::to_string(o.filters.near_threshold) +
                              " bits of sample " + first};
  }

  const BuildOptions& o;
  ShardWriter* writer;
  BuildReport* report;
  SinkProgress& sink;  // kept: --dedup only
  CheckpointWriter* checkpoints;
  const std::vector<KeptSample>* base;         // --append --dedup: OUT's images (may be null)
  const int64_t first_written, first_dropped;  // the counts at the start
  Progress progress;
  size_t closed_seen = 0;  // writer->Closed() already in sink.shards
  std::unique_ptr<DuplicateIndex> duplicates;  // --dedup only
};

SampleSink::SampleSink(const BuildOptions& o, const SinkTargets& targets)
    : state_(std::make_unique<State>(o, targets)) {}

SampleSink::~SampleSink() = default;

Status SampleSink::Add(ProcessedSample&& sample) { return state_->Add(std::move(sample)); }

void SampleSink::Finish() { state_->progress.Finish(); }

Status ProcessSamples(const PipelineInput& in,
                      const std::function<Status(ProcessedSample&&)>& consume) {
  MM_ASSIGN_OR_RETURN(SampleList::Cursor cursor,
                      in.samples.From(std::min(in.begin, in.samples.size())));
  Pipeline pipeline(std::move(cursor), in, consume);
  return pipeline.Run();
}

}  // namespace mm::pack
