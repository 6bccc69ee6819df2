#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace mds::base {

// Runs tasks on worker threads and hands results back in submission order, so a program's output
// never depends on the thread count or on scheduling. An exception thrown by the work function is
// rethrown by next() for that task, at its place in the order.
template <typename Task, typename Result>
class OrderedPipeline {
 public:
  // `work(task, worker_index)` runs on one of `threads` workers; worker_index < threads lets the
  // caller keep per-thread state (caches) without locks.
  using Work = std::function<Result(Task&, std::size_t)>;

  OrderedPipeline(std::size_t threads, Work work) : work_(std::move(work)) {
    for (std::size_t i = 0; i < threads; ++i) workers_.emplace_back([this, i] { run_worker(i); });
  }

  ~OrderedPipeline() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    task_ready_.notify_all();
    for (std::thread& worker : workers_) worker.join();
  }

  OrderedPipeline(const OrderedPipeline&) = delete;
  OrderedPipeline& operator=(const OrderedPipeline&) = delete;

  void submit(Task task) {
    {
      std::lock_guard lock(mutex_);
      tasks_.emplace_back(next_submitted_++, std::move(task));
    }
    task_ready_.notify_one();
  }

  // Submitted tasks whose results have not been taken with next().
  std::size_t pending() const {
    std::lock_guard lock(mutex_);
    return static_cast<std::size_t>(next_submitted_ - next_returned_);
  }

  // Waits for the oldest pending task's result. Must not be called with nothing pending.
  Result next() {
    std::unique_lock lock(mutex_);
    result_ready_.wait(lock, [&] { return done_.count(next_returned_) > 0; });
    auto node = done_.extract(next_returned_++);
    lock.unlock();
    Outcome& outcome = node.mapped();
    if (outcome.error) std::rethrow_exception(outcome.error);
    return std::move(*outcome.result);
  }

 private:
  struct Outcome {
    std::optional<Result> result;
    std::exception_ptr error;
  };

  void run_worker(std::size_t index) {
    for (;;) {
      std::pair<std::uint64_t, Task> job;
      {
        std::unique_lock lock(mutex_);
        task_ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
        if (stopping_) return;
        job = std::move(tasks_.front());
        tasks_.pop_front();
      }
      Outcome outcome;
      try {
        outcome.result.emplace(work_(job.second, index));
      } catch (...) {
        outcome.error = std::current_exception();
      }
      {
        std::lock_guard lock(mutex_);
        done_.emplace(job.first, std::move(outcome));
      }
      result_ready_.notify_all();
    }
  }

  Work work_;
  mutable std::mutex mutex_;
  std::condition_variable task_ready_;
  std::condition_variable result_ready_;
  std::deque<std::pair<std::uint64_t, Task>> tasks_;
  std::map<std::uint64_t, Outcome> done_;
  std::uint64_t next_submitted_ = 0;
  std::uint64_t next_returned_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;  // last: threads start after every other member exists
};

}  // namespace mds::base
