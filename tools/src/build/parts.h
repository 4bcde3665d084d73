// parts.h: `mmpack build` split over N processes on one or many machines that share the
// output folder: `mpirun -n N mmpack build ... --part auto`, `srun mmpack build ... --part
// auto`, or one `mmpack build ... --part I/N` each (a Slurm job array). The finished set is byte
// for byte the set one process builds with the same options, whatever N (schemas/FORMAT.md, "Builds
// in parts").
//
// How: every part reads the whole input and its ingest gives every part the same sample list
// (after the caption checks and filters, as a one-process build has it). Part I takes the
// samples [I*M/N, (I+1)*M/N) of its M samples, runs them through the same source and processor
// stages (read, decode + fit, tokenize, encode; build_pipeline.h) and writes what they made,
// in input order, to a spool in the staging folder:
//   OUT.mmpack-partial/.parts/part-III-of-NNN.spool   the processed samples (encoded images,
//                                                    token ids, drops), in order, each record
//                                                    with its XXH3-64
//   OUT.mmpack-partial/.parts/part-III-of-NNN.done    written once the spool is fsynced: the
//                                                    build's fingerprint, the spool's sample
//                                                    range, records, bytes and XXH3-64
//   OUT.mmpack-partial/.parts/part-III-of-NNN.failed a part's error, for the other parts
// The last part to finish (whichever it is) takes .parts/finish.lock, reads the N spools in
// order into the one SampleSink a one-process build uses (so --dedup, shard boundaries, stats
// and the report see the samples in input order, exactly as there), writes index.json and
// report.json and publishes OUT. The tokenizer is made once, by part 0 (trained or the given
// one), and written with .resume/build.json; the other parts wait for that file.
#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "build/pipeline.h"
#include "mm/internal/file.h"
#include "mm/status.h"

namespace mm::pack {

/// Which part of the build this process is. count 0: not split (a one-process build).
struct PartSpec {
  int64_t index = 0;
  int64_t count = 0;
  std::string origin;  // "--part", or the environment variables it came from
};

/// The --part value that reads the launcher's rank and size.
inline constexpr const char* kPartAuto = "auto";

/// The part this process builds, as `flag` (--part) asks (splitting is asked for, never
/// inherited: a training script launched by mpirun or srun that runs
/// `mmpack build` on rank 0 builds the whole input):
///   ""      one process, the whole input (count 0), whatever the environment says;
///   "I/N"   part I (0-based) of N, 0 <= I < N, plain decimals ("00/02", " 0/2", "0/+2" are
///           refused);
///   "auto"  the launcher's rank and size when it started more than one process
///           (LauncherPart), else one process.
/// A job array gives no count to detect: pass
/// --part ${SLURM_ARRAY_TASK_ID}/${SLURM_ARRAY_TASK_COUNT} (with --array=0-(N-1)).
/// Errors: InvalidArgument (a malformed --part or environment value).
[[nodiscard]] Result<PartSpec> ResolvePart(const std::string& flag);

/// The launcher's rank and size: OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (Open MPI's
/// mpirun), PMI_RANK/PMI_SIZE (MPICH, Intel MPI), SLURM_PROCID/SLURM_STEP_NUM_TASKS (srun; not
/// an sbatch script itself, which has no step), first found; count 0 when none is set or the
/// size is 1.
/// Errors: InvalidArgument (a value that is not a count, a rank not below the size).
[[nodiscard]] Result<PartSpec> LauncherPart();

/// Samples [begin, end) of a list.
struct SampleRange {
  size_t begin = 0, end = 0;
};

/// The samples of `part` (part.index of part.count, count > 0) over `total` samples.
SampleRange PartRange(const PartSpec& part, size_t total);

/// The folder of the parts' files in the staging folder.
std::filesystem::path PartsFolder(const std::filesystem::path& staging);
/// "part-000002-of-000004" (+ ".spool", ".done", ".failed").
std::string PartName(int64_t index, int64_t count);

/// What a finished spool holds (its .done file).
struct SpoolSummary {
  std::string fingerprint;
  int64_t begin = 0, end = 0;  // its sample range
  int64_t records = 0;         // processed samples (end - begin)
  int64_t bytes = 0;           // the spool file's size
  std::string xxh3_64;         // of the spool file
  uint64_t sources = 0;        // ChainSource of its samples' SourceStamps (build_resume.h)
};

/// Writes one part's spool: its processed samples in input order, buffered; Finish fsyncs it,
/// renames it from ".tmp" to its name and writes the .done file. Not thread-safe.
class SpoolWriter {
 public:
  /// Errors: IOError.
  static Result<std::unique_ptr<SpoolWriter>> Create(const std::filesystem::path& staging,
                                                     const PartSpec& part, SampleRange range,
                                                     std::string fingerprint);
  ~SpoolWriter();
  /// Errors: IOError.
  [[nodiscard]] Status Add(const ProcessedSample& sample);
  /// Errors: IOError; InvalidArgument when fewer samples than the range were added.
  [[nodiscard]] Status Finish();

 private:
  SpoolWriter() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The .done file of part `index` of `count`, when the part finished for the build
/// `fingerprint` and its spool is there with the size the file says; else nullopt.
std::optional<SpoolSummary> FinishedPart(const std::filesystem::path& staging, int64_t index,
                                         int64_t count, const std::string& fingerprint);

/// Records a part's failure (.failed, the message) for the others; removes it with ok status.
/// Nothing is written once the staging folder is gone (the set was published).
void RecordPartFailure(const std::filesystem::path& staging, const PartSpec& part,
                       const Status& status);
/// "part 1 of 3 failed: MESSAGE", of the first part of `count` with a .failed file written
/// since `since` (less 5 s of clock skew; older ones are of an earlier run); "" if none.
std::string FailedPart(const std::filesystem::path& staging, int64_t count, std::time_t since);
/// "part 0 of 3 failed: MESSAGE" when part `index` of `count` wrote a .failed file since
/// `since` (as FailedPart); "" if not.
std::string PartFailure(const std::filesystem::path& staging, int64_t index, int64_t count,
                        std::time_t since);

/// Reads the spools of a build in parts, in part order, checking each against its .done file.
class SpoolReader {
 public:
  /// `parts`: the .done summaries of parts 0..N-1, in order.
  SpoolReader(std::filesystem::path staging, int64_t count, std::vector<SpoolSummary> parts);
  ~SpoolReader();
  /// The next processed sample into `out`; false at the end of the last spool.
  /// Errors: Corruption (a record that does not match its XXH3-64, or a spool whose records,
  /// bytes or XXH3-64 are not those of its .done file; that .done is removed, so --resume makes
  /// the part again), IOError.
  [[nodiscard]] Result<bool> Next(ProcessedSample* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The lock that one finisher holds while it merges: flock(2) on .parts/finish.lock, without
/// waiting. A default UniqueFd (invalid) when another process holds it. Errors: IOError.
[[nodiscard]] Result<UniqueFd> TryLockFinish(const std::filesystem::path& staging);

}  // namespace mm::pack
