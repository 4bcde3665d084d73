// feed_source.h: FeedSource, the SampleSource of `mmpack build - --input-format feed`: the
// samples mmpack.Writer streams on a descriptor (the feed format, ingest/feed.h).
#pragma once

#include <filesystem>

#include "build/sample_source.h"

namespace mm::pack {

/// Reads the feed from `in_fd` when the build asks for its samples; first writes the line
/// "ready\n" to `ready_fd` (-1: none), so that the writing program knows the options were
/// accepted and OUT claimed before it sends anything. Images given as bytes are kept in a
/// hidden folder of its own beside OUT (.mmpack-feed-XXXXXX), removed when the FeedSource goes,
/// after the build. Owns neither descriptor. Not thread-safe.
class FeedSource : public SampleSource {
 public:
  FeedSource(int in_fd, int ready_fd) : in_fd_(in_fd), ready_fd_(ready_fd) {}
  ~FeedSource() override;
  FeedSource(const FeedSource&) = delete;
  FeedSource& operator=(const FeedSource&) = delete;

  /// Errors: IOError (the image folder cannot be made in `spill_dir`; the descriptors), those
  /// of IngestFeed (Corruption: a stream cut short or malformed).
  [[nodiscard]] Result<IngestResult> Ingest(const FieldNames& fields,
                                            const std::filesystem::path& spill_dir) override;

 private:
  int in_fd_, ready_fd_;
  std::filesystem::path image_dir_;  // made by Ingest
};

}  // namespace mm::pack
