#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/kernels/thread_pool.h"

using ember::ThreadPool;

TEST_CASE("physical_core_count is positive") { CHECK(ThreadPool::physical_core_count() >= 1); }

TEST_CASE("parallel_for runs every chunk exactly once, across sizes and repeated jobs") {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    CHECK(pool.size() == threads);
    for (int64_t n_chunks : {0, 1, 2, 3, 7, 64, 1000}) {
      for (int repeat = 0; repeat < 20; ++repeat) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n_chunks));
        std::atomic<int> bad_thread{0};
        pool.parallel_for(n_chunks, [&](int64_t chunk, int thread) {
          hits[static_cast<size_t>(chunk)].fetch_add(1, std::memory_order_relaxed);
          if (thread < 0 || thread >= threads) bad_thread.fetch_add(1);
        });
        int wrong = 0;
        for (auto& h : hits) wrong += h.load() != 1;
        REQUIRE(wrong == 0);
        REQUIRE(bad_thread.load() == 0);
      }
    }
  }
}

TEST_CASE("a pool idle long enough to block still wakes up for the next job") {
  ThreadPool pool(3);
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin phase
    std::atomic<int64_t> sum{0};
    pool.parallel_for(100, [&](int64_t chunk, int) { sum.fetch_add(chunk); });
    CHECK(sum.load() == 4950);
  }
}
