// interrupt_note.h: what Ctrl-C (SIGINT) or a scheduler's time limit (SIGTERM) tells the user
// of a build that can be resumed.
#pragma once

#include <signal.h>

#include <filesystem>

namespace mm::pack {

/// While alive: on SIGINT and SIGTERM, a line saying that the shards finished so far are kept
/// in `staging` and that --resume continues the build, then the signal's default action;
/// except where the signal is ignored (a build started in the background by a script stays
/// immune to Ctrl-C). The destructor puts the dispositions from before back. One at a time.
class InterruptNote {
 public:
  explicit InterruptNote(const std::filesystem::path& staging);
  ~InterruptNote();
  InterruptNote(const InterruptNote&) = delete;
  InterruptNote& operator=(const InterruptNote&) = delete;

 private:
  struct sigaction old_int_ = {};
  struct sigaction old_term_ = {};
};

}  // namespace mm::pack
