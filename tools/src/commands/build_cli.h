// build_cli.h: `mmpack build`'s command line (CLI11): its options as CLI11 fills them and
// their parse into BuildOptions. Part of the mmpack executable (main.cc), not of mm_pack.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "commands/commands.h"

namespace mm::pack::cli {

// `mmpack build`'s options as CLI11 fills them: BuildOptions, plus the values that are parsed
// after CLI11 (sizes, and the typed options as text, so that --help lists their names).
struct BuildArgs {
  mm::pack::BuildOptions options;
  std::string image_size = "224", shard_size = "1GiB";
  std::string input_format{ToString(options.input_format)};
  std::string resize_mode{ToString(options.resize_mode)};
  std::string compression{ToString(options.compression)};
  std::string codec{ToString(options.image_codec)};
  CLI::Option* compression_option = nullptr;  // given on the command line?
  CLI::Option* level_option = nullptr;
  CLI::Option* image_size_option = nullptr;
  CLI::Option* quality_option = nullptr;
  std::string normalize{ToString(options.text.normalize)};
  std::string dedup{ToString(options.filters.dedup)};
  std::string min_score;
};

/// Adds `mmpack build` to `app`, filling `a`.
CLI::App* AddBuild(CLI::App& app, BuildArgs* a);

/// The values CLI11 left as text, into `a->options`: false (after one line on stderr) when one
/// cannot be parsed.
bool FinishBuild(BuildArgs* a);

// "1GiB", "256MB", "500M", "4096" -> bytes (mm/internal/byte_size.h).
bool ParseBytes(const std::string& text, int64_t* bytes);

}  // namespace mm::pack::cli
