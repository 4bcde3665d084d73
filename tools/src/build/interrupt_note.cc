// interrupt_note.cc: see interrupt_note.h.
#include "build/interrupt_note.h"

#include <unistd.h>

#include <csignal>
#include <string>
#include <utility>

namespace mm::pack {

namespace fs = std::filesystem;

namespace {

// The note OnInterrupt writes (async-signal-safe: a pointer and a size set before).
const char* g_interrupt_note = nullptr;
size_t g_interrupt_note_size = 0;

void OnInterrupt(int sig) {
  if (g_interrupt_note != nullptr) {
    ssize_t ignored = ::write(STDERR_FILENO, g_interrupt_note, g_interrupt_note_size);
    (void)ignored;
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

InterruptNote::InterruptNote(const fs::path& staging) {
  static std::string note;
  note = "\nmmpack build: interrupted; the shards finished so far are kept in " + staging.string() +
         ": run the same command with --resume to continue\n";
  g_interrupt_note = note.c_str();
  g_interrupt_note_size = note.size();
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  for (auto [sig, old] : {std::pair{SIGINT, &old_int_}, std::pair{SIGTERM, &old_term_}}) {
    ::sigaction(sig, nullptr, old);
    if (old->sa_handler != SIG_IGN) ::sigaction(sig, &sa, nullptr);
  }
}

InterruptNote::~InterruptNote() {
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  g_interrupt_note = nullptr;
}

}  // namespace mm::pack
