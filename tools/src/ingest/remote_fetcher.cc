// remote_fetcher.cc: see remote_fetcher.h.
#include "ingest/remote_fetcher.h"

#include <utility>

#include "ingest/remote_file.h"

namespace mm::pack {

RemoteFetcher::~RemoteFetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::future<Status> RemoteFetcher::Fetch(std::string url, std::string* bytes, int64_t max_bytes) {
  std::packaged_task<Status()> task(
      [url = std::move(url), bytes, max_bytes]() { return ReadRemoteFile(url, bytes, max_bytes); });
  std::future<Status> done = task.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The thread first: if it cannot be made, nothing is queued that would write into `bytes`
    // after the caller, seeing the exception, has freed it.
    if (static_cast<int>(threads_.size()) < max_threads_) threads_.emplace_back([this] { Work(); });
    queue_.push_back(std::move(task));
  }
  ready_.notify_one();
  return done;
}

void RemoteFetcher::CancelQueued() {
  std::deque<std::packaged_task<Status()>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped.swap(queue_);
  }
}  // `dropped` destroyed here: each future becomes ready with std::future_error (broken_promise)

void RemoteFetcher::Work() {
  for (;;) {
    std::packaged_task<Status()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left to fetch
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace mm::pack
