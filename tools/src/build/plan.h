// plan.h: what one `mmpack build` will do, decided once before any work: the options checked,
// the image stage's options, OUT and its staging folder, and the mode. Every stage of build/
// reads the plan; none of them changes it.
#pragma once

#include <filesystem>

#include "build/options.h"
#include "build/parts.h"
#include "image/image_pipeline.h"
#include "mm/status.h"

namespace mm::pack {

/// How the set is made (build/build.h has one driver per mode).
enum class BuildMode {
  kOneProcess,  // the whole input in this process: a fresh build is a --resume from nothing
  kPart,        // --part I/N: a share of the samples into a spool; the last part merges
  kAppend,      // --append: new shards after OUT's, published with them
};

/// The build as asked: made by MakePlan, read-only afterwards.
struct BuildPlan {
  BuildOptions options;  // as given (MakePlan checks them; an --append adopts OUT's later)
  ImageOptions image;    // the image stage's options, from `options`
  PartSpec part;         // count 0 but for kPart
  BuildMode mode = BuildMode::kOneProcess;
  std::filesystem::path out;      // OUT, NormalOutput (set/output_dir.h)
  std::filesystem::path staging;  // OUT.mmpack-partial beside it (StagingPath)
};

/// The plan of `given`: option values main.cc does not check (sizes, --quality, --max-aspect,
/// --max-size against --resize-mode, --resume with --append...), an output that is a URL, the
/// part (ResolvePart; a note on stderr when a launcher started several processes and no --part
/// was given). Creates nothing. Errors: InvalidArgument, one line each.
[[nodiscard]] Result<BuildPlan> MakePlan(const BuildOptions& given);

/// The checks that must fail at once, before anything is created: RAW exists and is not
/// empty; OUT (`plan.out`) is not the root, the current folder or a parent of it, does
/// not hold RAW, and does not exist unless --overwrite and CheckReplaceable (set_publish.h)
/// accepts it. Errors: NotFound, InvalidArgument,
/// AlreadyExists, each one line.
[[nodiscard]] Status CheckPaths(const BuildPlan& plan);

}  // namespace mm::pack
