// remote_fetcher.h: images at URLs read ahead of the threads that decode them (private to
// tools/). A build's decoding threads are as many as its cores; waiting on one GET each, they
// would leave a store with tens of milliseconds of latency idle between requests. The fetcher's
// own threads keep many GETs (ReadRemoteFile, retried) in flight at once, each thread with its
// own kept-alive connection; the build's pipeline bounds how many images wait in memory.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mm/status.h"

namespace mm::pack {

/// A fixed set of fetch threads, started at the first Fetch (a build without remote images
/// starts none). Thread-safe. The destructor lets the fetches already asked for finish, then
/// joins the threads.
class RemoteFetcher {
 public:
  /// At most `threads` (>= 1) GETs at once.
  explicit RemoteFetcher(int threads) : max_threads_(threads < 1 ? 1 : threads) {}
  ~RemoteFetcher();
  RemoteFetcher(const RemoteFetcher&) = delete;
  RemoteFetcher& operator=(const RemoteFetcher&) = delete;

  /// Starts ReadRemoteFile(url, bytes, max_bytes) on a fetch thread; the future gives its
  /// Status. `*bytes` must live, untouched, until the future is ready.
  std::future<Status> Fetch(std::string url, std::string* bytes, int64_t max_bytes);

  /// Drops the fetches not yet started: their futures become ready at once, holding
  /// std::future_error (broken_promise), and never write their `bytes`. Those in flight finish.
  void CancelQueued();

 private:
  void Work();
  const int max_threads_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<Status()>> queue_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

}  // namespace mm::pack
