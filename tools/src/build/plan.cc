// plan.cc: see plan.h.
#include "build/plan.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "image/colour.h"
#include "ingest/brace.h"
#include "mm/internal/set_rules.h"
#include "set/output_dir.h"
#include "set/set_publish.h"

namespace mm::pack {

namespace fs = std::filesystem;

namespace {

// Option values main.cc does not check, and the image stage's options.
Result<ImageOptions> ValidateOptions(const BuildOptions& o) {
  ImageOptions image_options;
  image_options.mode = o.resize_mode;
  MM_ASSIGN_OR_RETURN(image_options.background, ParseColour(o.background));
  // The reader refuses a set whose sides exceed kMaxImageSide (mm/internal/set_rules.h).
  constexpr int kMax = mm::reader::kMaxImageSide;
  if (o.tokenizer == kNoTokenizer && (o.filters.min_tokens > 0 || o.filters.drop_long_captions)) {
    return Status::InvalidArgument(
        "--min-tokens and --drop-long-captions count token ids; --tokenizer none stores none");
  }
  const bool jpeg = o.image_codec == mm::format::ImageCodec::kJpeg;
  if (!mm::format::IsFixedSize(o.resize_mode)) {
    if (!jpeg) {
      return Status::InvalidArgument("--resize-mode " + std::string(ToString(o.resize_mode)) +
                                     " keeps each image's own size, which needs --codec jpeg "
                                     "(--codec raw stores one [N, H, W, 3] array)");
    }
    if (o.max_size < 1 || o.max_size > kMax) {
      return Status::InvalidArgument("--resize-mode " + std::string(ToString(o.resize_mode)) +
                                     " needs --max-size N, 1.." + std::to_string(kMax) + " pixels");
    }
  } else if (o.max_size != 0) {
    return Status::InvalidArgument("--max-size bounds the keep-ratio modes; with --resize-mode " +
                                   std::string(ToString(o.resize_mode)) + " use --image-size");
  }
  if (jpeg && (o.jpeg_quality < 1 || o.jpeg_quality > 100)) {
    return Status::InvalidArgument("--quality must be 1..100");
  }
  if (o.image_width <= 0 || o.image_height <= 0 || o.image_width > kMax || o.image_height > kMax) {
    return Status::InvalidArgument("--image-size must be 1.." + std::to_string(kMax) +
                                   " pixels a side");
  }
  if (o.max_tokens < 1) return Status::InvalidArgument("--max-tokens must be >= 1");
  // An aspect is longer/shorter side, at least 1: NaN compares false with every aspect and
  // would keep everything, a value below 1 would drop every image.
  const double aspect = o.filters.max_aspect;
  if (!std::isfinite(aspect) || (aspect != 0 && aspect < 1)) {
    return Status::InvalidArgument("--max-aspect is " + std::to_string(aspect) +
                                   "; it takes a finite ratio >= 1 (longer/shorter side), or 0: "
                                   "no limit");
  }
  if (o.append && o.resume) {
    return Status::InvalidArgument(
        "--resume continues an interrupted build, not an --append; run the --append again");
  }
  if (o.append && o.overwrite) {
    return Status::InvalidArgument("--append adds to OUT and --overwrite replaces it; choose one");
  }
  image_options.width = o.image_width;
  image_options.height = o.image_height;
  image_options.max_size = o.max_size;
  image_options.max_pixels = o.max_pixels;
  return image_options;
}

bool IsInside(const fs::path& inner, const fs::path& outer) {
  std::error_code ec;
  fs::path a = fs::weakly_canonical(inner, ec);
  fs::path b = fs::weakly_canonical(outer, ec);
  auto ai = a.begin();
  for (auto bi = b.begin(); bi != b.end(); ++bi, ++ai) {
    if (bi->empty()) continue;
    if (ai == a.end() || *ai != *bi) return false;
  }
  return true;
}

// A build without --part under a launcher that started several processes (mpirun, srun, or a
// training script they started) builds the whole input in this process: one line says so and
// names --part auto, which splits it over the ranks.
void NoteLauncher(const BuildOptions& o, const PartSpec& part) {
  if (!o.part.empty() || part.count > 0 || o.quiet) return;
  auto launcher = LauncherPart();
  if (!launcher.ok() || launcher->count == 0) return;
  std::fprintf(stderr,
               "mmpack build: note: %s says rank %lld of %lld; this process builds the whole "
               "input (--part auto splits it over the ranks)\n",
               launcher->origin.c_str(), static_cast<long long>(launcher->index),
               static_cast<long long>(launcher->count));
}

}  // namespace

Result<BuildPlan> MakePlan(const BuildOptions& given) {
  BuildPlan plan;
  plan.options = given;
  MM_RETURN_NOT_OK(RefuseUrlOutput(given.output, "output"));  // before the lock makes a folder
  MM_ASSIGN_OR_RETURN(plan.image, ValidateOptions(given));
  MM_ASSIGN_OR_RETURN(plan.part, ResolvePart(given.part));
  NoteLauncher(given, plan.part);
  if (plan.part.count > 0 && given.append) {
    return Status::InvalidArgument("--append runs as one process; drop --part");
  }
  if (given.input_format == InputFormat::kFeed) {
    // The samples come once, from the program that streams them: no share to split among
    // processes, none to read again where an interrupted build stopped.
    if (given.input != "-") {
      return Status::InvalidArgument("--input-format feed reads stdin: give RAW as '-', not '" +
                                     given.input + "'");
    }
    if (plan.part.count > 0 || given.resume) {
      return Status::InvalidArgument(
          std::string(given.resume ? "--resume" : "--part") +
          " reads RAW again; a fed build (--input-format feed, mmpack.Writer) gets its samples "
          "once: write them again into a new build");
    }
  }
  plan.mode = plan.part.count > 0 ? BuildMode::kPart
              : given.append      ? BuildMode::kAppend
                                  : BuildMode::kOneProcess;
  plan.out = NormalOutput(given.output);
  plan.staging = StagingPath(plan.out);
  return plan;
}

Status CheckPaths(const BuildPlan& plan) {
  const BuildOptions& o = plan.options;
  const fs::path& out = plan.out;
  std::error_code ec;
  fs::path raw(o.input);
  std::vector<std::string> listed;  // a brace list's names (ingest/brace.h)
  if (o.input_format == InputFormat::kFeed) {
    // stdin: no RAW on disk to check
  } else if (IsRemoteUrl(o.input)) {
    // Ingest asks the server for each tar (ingest/remote_file.h).
  } else if (!o.input.empty() && !fs::exists(raw, ec) && HasBraceGroup(o.input)) {
    MM_ASSIGN_OR_RETURN(listed, ExpandBraces(o.input));
  } else if (o.input.empty() || !fs::exists(raw, ec)) {
    return Status::NotFound("input '" + o.input + "' does not exist");
  }
  const bool not_on_disk = o.input_format == InputFormat::kFeed || IsRemoteUrl(o.input);
  if (!listed.empty() || not_on_disk) {
    // Ingest reports the names that do not exist.
  } else if (fs::is_directory(raw, ec)) {
    if (fs::directory_iterator(raw, ec) == fs::directory_iterator()) {
      return Status::InvalidArgument("input folder '" + o.input + "' is empty" +
                                     (ec ? " (" + ec.message() + ")" : std::string()));
    }
  } else if (fs::file_size(raw, ec) == 0 || ec) {
    return Status::InvalidArgument("input file '" + o.input + "' is empty");
  }
  if (o.output.empty()) return Status::InvalidArgument("no output directory (-o OUT)");
  // OUT is replaced as a whole (renamed aside, then deleted): it must not be the root, the
  // current folder or one of its parents, nor hold the input.
  if (!out.has_relative_path()) {
    return Status::InvalidArgument("output '" + o.output +
                                   "' is the root folder; choose a new directory");
  }
  const fs::path cwd = fs::current_path(ec);
  if (!ec && IsInside(cwd, out)) {
    return Status::InvalidArgument("output '" + o.output +
                                   "' is the current directory or one of its parents; "
                                   "choose a new directory");
  }
  if (listed.empty() && !not_on_disk) listed.push_back(o.input);
  for (const std::string& input : listed) {
    if (IsInside(fs::path(input), out)) {
      return Status::InvalidArgument("input '" + input + "' lies inside output '" + o.output +
                                     "'; choose another output directory");
    }
  }
  const fs::file_status st = fs::symlink_status(out, ec);
  if (o.append) {  // OUT must be a set to add to (build_append.h)
    if (!fs::exists(st)) {
      return Status::NotFound("--append: output '" + o.output +
                              "' does not exist; build it without --append");
    }
    return CheckReplaceable(out);  // set_publish.h: an mmpack set and nothing else
  }
  if (fs::exists(st)) {
    if (!o.overwrite) {
      return Status::AlreadyExists("output '" + o.output +
                                   "' already exists; pass --overwrite to replace it");
    }
    MM_RETURN_NOT_OK(CheckReplaceable(out));  // set_publish.h
  }
  return Status::OK();
}

}  // namespace mm::pack
