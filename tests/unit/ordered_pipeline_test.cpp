#include "base/ordered_pipeline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace mds::base {
namespace {

TEST(OrderedPipeline, ReturnsResultsInSubmissionOrder) {
  for (const std::size_t threads : {1u, 2u, 5u}) {
    OrderedPipeline<int, int> pipeline(threads, [](int& task, std::size_t) {
      // Later tasks finish first, so only the ordering logic can restore the order.
      std::this_thread::sleep_for(std::chrono::microseconds((50 - task % 50) * 20));
      return task * 10;
    });
    int next_expected = 0;
    for (int i = 0; i < 200; ++i) {
      pipeline.submit(i);
      if (pipeline.pending() > 7) {
        EXPECT_EQ(pipeline.next(), 10 * next_expected++);
      }
    }
    while (pipeline.pending() > 0) EXPECT_EQ(pipeline.next(), 10 * next_expected++);
    EXPECT_EQ(next_expected, 200);
  }
}

TEST(OrderedPipeline, GivesEachWorkerItsOwnIndex) {
  constexpr std::size_t kThreads = 3;
  OrderedPipeline<int, std::size_t> pipeline(kThreads,
                                             [](int&, std::size_t worker) { return worker; });
  for (int i = 0; i < 50; ++i) pipeline.submit(i);
  for (int i = 0; i < 50; ++i) EXPECT_LT(pipeline.next(), kThreads);
}

TEST(OrderedPipeline, RethrowsAnErrorAtItsPlaceInTheOrder) {
  OrderedPipeline<int, int> pipeline(2, [](int& task, std::size_t) {
    if (task == 3) throw std::runtime_error("task 3 failed");
    return task;
  });
  for (int i = 0; i < 6; ++i) pipeline.submit(i);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pipeline.next(), i);
  EXPECT_THROW(
      {
        try {
          pipeline.next();
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "task 3 failed");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_EQ(pipeline.next(), 4);
}

TEST(OrderedPipeline, StopsCleanlyWithWorkStillQueued) {
  OrderedPipeline<int, int> pipeline(2, [](int& task, std::size_t) { return task; });
  for (int i = 0; i < 100; ++i) pipeline.submit(i);
  // Destruction with pending tasks must neither hang nor crash.
}

}  // namespace
}  // namespace mds::base
