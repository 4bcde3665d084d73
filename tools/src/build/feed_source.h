// feed_source.h: FeedSource, the SampleSource of `mmpack build - --input-format feed`: the
// samples mmpack.Writer streams on a descriptor (the feed format, ingest/feed.h).
#pragma once

#include <filesystem>

#include "build/sample_source.h"

namespace mm::pack {

/// The folder beside OUT (NormalOutput) where a fed build keeps the images given as bytes:
/// "OUT.mmpack-feed", as the staging folder is "OUT.mmpack-partial".
std::filesystem::path FeedImagePath(const std::filesystem::path& out);

/// Reads the feed from `in_fd` when the build asks for its samples; first writes the line
/// "ready\n" to `ready_fd` (-1: none), so that the writing program knows the options were
/// accepted and OUT locked and claimed before it sends anything. Images given as bytes are
/// kept in FeedImagePath(out) (one left by a fed build that was killed is replaced: OUT is
/// locked by then), removed when the FeedSource goes, after the build. Owns neither
/// descriptor. Not thread-safe.
class FeedSource : public SampleSource {
 public:
  FeedSource(int in_fd, int ready_fd, const std::filesystem::path& out)
      : in_fd_(in_fd), ready_fd_(ready_fd), image_dir_(FeedImagePath(out)) {}
  ~FeedSource() override;
  FeedSource(const FeedSource&) = delete;
  FeedSource& operator=(const FeedSource&) = delete;

  /// Errors: IOError (the image folder cannot be made; the descriptors), those of IngestFeed
  /// (Corruption: a stream cut short or malformed).
  [[nodiscard]] Result<IngestResult> Ingest(const FieldNames& fields,
                                            const std::filesystem::path& spill_dir) override;

 private:
  int in_fd_, ready_fd_;
  std::filesystem::path image_dir_;
  bool made_ = false;  // image_dir_ made by Ingest: removed by the destructor
};

}  // namespace mm::pack
