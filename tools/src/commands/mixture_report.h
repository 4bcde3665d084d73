// mixture_report.h: `mmpack info|verify|stats` of a mixture of sets ("A:0.7,B:0.3" or a JSON
// file; mm/internal/mixture.h, reader/README.md "Several sets by weight"): each set reported as
// the command reports one set, then the mixture as a whole.
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "mm/reader.h"
#include "mm/status.h"

namespace mm::pack {

/// How a command reports one set at `location` on `out` (one JSON object when `json`).
using SetReport = std::function<Status(const std::string& location, std::ostream& out, bool json)>;

/// nullopt when `location` is not a mixture (a set directory or URL: the caller reports it as
/// before). Otherwise reports every set of the mixture with `each`, in the mixture's order:
///  - text: "== set I of N: LOCATION (weight W)" before each set's report, then "== mixture"
///    and a line per set (weight, samples, its share of an epoch: the items a Loader draws from
///    it per epoch under caption_mode random) and the totals (samples, captions, tokens, shards,
///    bytes, items per epoch);
///  - json: one object {"mixture", "weighted", "epoch_items", "sets": [{"path", "weight",
///    "samples", "epoch_samples", "report": each set's object}], "total": {"samples",
///    "captions", "tokens", "shards", "bytes"}, "ok"}.
/// The totals come from ShardSet::Open of the mixture (through `remote`), which also checks
/// that the sets may be mixed (one tokenizer). Every set is reported even when one fails; the
/// result is the first error, naming its set ("set 1 (B): ..."), else Open's, else OK.
std::optional<Status> RunOnMixture(const std::string& location, std::ostream& out, bool json,
                                   const mm::reader::RemoteOptions& remote, const SetReport& each);

}  // namespace mm::pack
