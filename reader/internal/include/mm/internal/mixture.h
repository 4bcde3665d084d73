// mm/internal/mixture.h: a mixture of shard sets drawn by weight, as ShardSet::Open accepts it
// (after MosaicML Streaming's Stream(proportion=...), LitData's CombinedStreamingDataset(weights)
// and open_clip's upsampling factors). Internal (mm_reader_internal): compiled into mm_reader;
// `mmpack info|verify|stats` parse a mixture with it (tools/src/commands/mixture_report.h).
//
// Two spellings:
//   "A:0.7,B:0.3"  comma-separated locations, each with ":WEIGHT" after its last colon, or none
//                  with a weight (then each set counts with its natural size: a concatenation);
//   a JSON file    {"sets": [{"path": "A", "weight": 0.7}, {"path": "B", "weight": 0.3}],
//                   "epoch_size": 100000}   ("epoch_size" optional; relative local paths are
//                   relative to the file's directory).
// A location is local, s3:// or http(s)://; "http://host:8080" keeps its port (a weight needs
// a path before it). How an epoch's size and each set's share follow from the weights:
// epoch_order.h and reader/README.md ("Several sets by weight").
// Thread-safe: pure functions (ParseMixture reads the JSON file).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mm/status.h"

namespace mm::reader::internal {

struct MixtureSpec {
  struct Set {
    std::string location;
    double weight = 0;  // > 0 when weighted
  };
  std::vector<Set> sets;
  bool weighted = false;   // false: the sets concatenated, each with its natural share
  int64_t epoch_size = 0;  // 0: the sum of the sets' items
};

/// Largest "epoch_size": positions and batch arithmetic stay far inside int64, and a larger
/// epoch is a typo (the epoch's shard visits are bounded too: epoch_order.h).
inline constexpr int64_t kMaxEpochSize = int64_t{1} << 53;

/// The mixture `location` names, or nullopt for a single set (a directory, a set URL).
/// Errors: InvalidArgument (a malformed list or JSON file, a weight that is not a positive
/// finite number, weights on some sets only, an epoch_size outside [1, kMaxEpochSize]), those
/// of reading the file.
Result<std::optional<MixtureSpec>> ParseMixture(const std::string& location);

}  // namespace mm::reader::internal
