#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
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

// A task that throws (e.g. a storage read failing inside a pool task) must reach the caller of
// parallel_for, never std::terminate in a worker, and the caller's frame must not unwind while
// other threads still run tasks that reference it.
TEST_CASE("an exception in a task reaches the caller after every thread left the job") {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int64_t n_chunks : {1, 2, 7, 64, 1000}) {
      for (int64_t bad : {int64_t{0}, n_chunks / 2, n_chunks - 1}) {
        INFO("threads ", threads, " chunks ", n_chunks, " throwing chunk ", bad);
        std::atomic<int> running{0};
        std::atomic<int> left_running_at_throw_site{-1};
        bool caught = false;
        try {
          pool.parallel_for(n_chunks, [&](int64_t chunk, int) {
            running.fetch_add(1);
            // Slow tasks: the others are still busy when the bad one throws.
            std::this_thread::sleep_for(std::chrono::microseconds(chunk % 3 == 0 ? 200 : 20));
            running.fetch_sub(1);
            if (chunk == bad) throw std::runtime_error("chunk " + std::to_string(chunk));
          });
        } catch (const std::runtime_error& e) {
          caught = true;
          left_running_at_throw_site = running.load();
          CHECK(std::string(e.what()) == "chunk " + std::to_string(bad));
        }
        CHECK(caught);
        CHECK(left_running_at_throw_site.load() == 0);  // nobody still inside a task
      }
    }
    // Still usable: every chunk of the next job runs exactly once.
    std::vector<std::atomic<int>> hits(500);
    pool.parallel_for(500, [&](int64_t chunk, int) { hits[static_cast<size_t>(chunk)].fetch_add(1); });
    int wrong = 0;
    for (auto& h : hits) wrong += h.load() != 1;
    CHECK(wrong == 0);
  }
}

TEST_CASE("when several tasks throw, one exception arrives and the rest are dropped") {
  ThreadPool pool(4);
  for (int round = 0; round < 20; ++round) {
    std::atomic<int64_t> started{0};
    int caught = 0;
    try {
      pool.parallel_for(10000, [&](int64_t chunk, int) {
        started.fetch_add(1);
        if (chunk % 2 == 0) throw std::out_of_range("even chunk");
      });
    } catch (const std::out_of_range&) {
      ++caught;
    }
    CHECK(caught == 1);
    // After the first failure no new chunks are handed out: far fewer than all of them started.
    CHECK(started.load() < 10000);
  }
  // A failed job leaves nothing behind for the next one: it neither throws nor skips chunks.
  std::atomic<int64_t> sum{0};
  CHECK_NOTHROW(pool.parallel_for(100, [&](int64_t chunk, int) { sum.fetch_add(chunk); }));
  CHECK(sum.load() == 4950);
}

TEST_CASE("a non-std exception from a worker's chunk reaches the caller too") {
  ThreadPool pool(2);
  // Chunk 1 runs on whichever thread takes it; the caller's own chunks may all succeed.
  for (int round = 0; round < 50; ++round) {
    bool caught = false;
    try {
      pool.parallel_for(2, [&](int64_t chunk, int) {
        if (chunk == 1) throw 42;
      });
    } catch (int v) {
      caught = v == 42;
    }
    CHECK(caught);
  }
}
