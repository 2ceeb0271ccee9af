#pragma once
// A persistent pool of worker threads for the kernels: created once per engine, reused for every
// matmul of every token. Work is handed out in chunks from an atomic counter so uneven chunks
// balance themselves; the calling thread works too. No allocation per parallel_for.
#include <cstdint>
#include <type_traits>

namespace ember {

class ThreadPool {
 public:
  // n_threads <= 0 means one thread per physical core.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;  // threads taking part, including the caller

  // Calls fn(chunk, thread_index) for every chunk in [0, n_chunks), spread over the threads;
  // returns when all are done. fn must not throw. Not reentrant.
  template <class Fn>
  void parallel_for(int64_t n_chunks, Fn&& fn) {
    using Callable = std::remove_reference_t<Fn>;
    run(n_chunks, [](void* ctx, int64_t chunk, int thread) { (*static_cast<Callable*>(ctx))(chunk, thread); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  static int physical_core_count();

 private:
  using ChunkFn = void (*)(void* ctx, int64_t chunk, int thread);
  void run(int64_t n_chunks, ChunkFn fn, void* ctx);
  struct State;
  State* state_;
};

}  // namespace ember
