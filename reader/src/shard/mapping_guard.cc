// mapping_guard.cc: see mapping_guard.h.
#include "shard/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>

namespace mm::reader::internal {

// One registered mapping. Slots live in blocks that are never freed, so the handler can read
// any slot at any time; a slot is claimed with `used` and published by storing `begin` last.
struct GuardSlot {
  std::atomic<bool> used{false};
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<uint32_t> faults{0};
};

namespace {

using Slot = GuardSlot;
constexpr size_t kSlotsPerBlock = 1024;
struct Block {
  Slot slots[kSlotsPerBlock];
  std::atomic<Block*> next{nullptr};
};
Block g_first;
uintptr_t g_page_size = 4096;
struct sigaction g_previous;

static_assert(std::atomic<uintptr_t>::is_always_lock_free, "the handler reads slots lock-free");

// The registered mapping holding `addr`, or nullptr.
Slot* Find(uintptr_t addr) {
  for (Block* b = &g_first; b != nullptr; b = b->next.load(std::memory_order_acquire)) {
    for (Slot& s : b->slots) {
      const uintptr_t begin = s.begin.load(std::memory_order_acquire);
      if (begin != 0 && addr >= begin && addr < s.end.load(std::memory_order_acquire)) return &s;
    }
  }
  return nullptr;
}

// What the handler installed before ours would have done.
void Chain(int sig, siginfo_t* info, void* context) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler == SIG_IGN) return;
  if (g_previous.sa_handler != SIG_DFL) {
    g_previous.sa_handler(sig);
    return;
  }
  // The default action: restore it; a fault re-raises when the instruction is retried, a sent
  // signal is raised again.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  if (info->si_code <= 0) raise(sig);
}

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (info->si_code > 0) {  // raised by the kernel for a memory access
    const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
    if (Slot* s = Find(addr)) {
      const uintptr_t page = addr & ~(g_page_size - 1);
      const uintptr_t end = s->end.load(std::memory_order_acquire);
      void* zeros = mmap(reinterpret_cast<void*>(page), end - page, PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      if (zeros != MAP_FAILED) {
        s->faults.fetch_add(1, std::memory_order_acq_rel);
        errno = saved_errno;
        return;  // the read retries, and reads zeros
      }
    }
  }
  errno = saved_errno;
  Chain(sig, info, context);
}

void Install() {
  g_page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  struct sigaction sa = {};
  sa.sa_sigaction = &OnSigbus;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

GuardSlot* RegisterMapping(const void* begin, size_t length) {
  static std::once_flag installed;
  std::call_once(installed, Install);
  if (begin == nullptr || length == 0) return nullptr;
  for (Block* b = &g_first;;) {
    for (Slot& s : b->slots) {
      if (s.used.exchange(true, std::memory_order_acq_rel)) continue;
      s.faults.store(0, std::memory_order_relaxed);
      s.end.store(reinterpret_cast<uintptr_t>(begin) + length, std::memory_order_release);
      s.begin.store(reinterpret_cast<uintptr_t>(begin), std::memory_order_release);
      return &s;
    }
    Block* next = b->next.load(std::memory_order_acquire);
    if (next == nullptr) {
      Block* made = new Block();  // never freed: the handler may read it at any time
      if (b->next.compare_exchange_strong(next, made, std::memory_order_acq_rel)) {
        next = made;
      } else {
        delete made;  // another thread appended one first: `next` is it
      }
    }
    b = next;
  }
}

void UnregisterMapping(GuardSlot* slot) {
  if (slot == nullptr) return;
  slot->begin.store(0, std::memory_order_release);
  slot->end.store(0, std::memory_order_release);
  slot->used.store(false, std::memory_order_release);
}

uint32_t MappingFaults(const GuardSlot* slot) {
  return slot ? slot->faults.load(std::memory_order_acquire) : 0;
}

}  // namespace mm::reader::internal
