#pragma once
// Replaces the global operator new/delete with malloc/free plus a process-wide counter, so a test
// can check that a code path (e.g. a decode step) allocates nothing: read allocation_count()
// before and after. Include in exactly ONE .cpp of a test binary (the definitions are not inline,
// as replacement functions must not be). Every plain form is replaced so that new and delete
// always pair malloc and free (sanitizer builds check the pairing).
#include <atomic>
#include <cstdlib>
#include <new>

namespace ember::test {
inline std::atomic<long> g_allocation_count{0};  // test instrumentation only
inline long allocation_count() { return g_allocation_count.load(std::memory_order_relaxed); }
inline void* counted_malloc(std::size_t n) {
  g_allocation_count.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
}  // namespace ember::test

// GCC 12 (-Wmismatched-new-delete) inlines std::allocator's deallocation into callers and then
// sees a free() of memory that came from operator new, not knowing both are replaced here to pair
// malloc with free. The pairing is correct by construction, so the check is off for these bodies.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t n) {
  if (void* p = ember::test::counted_malloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = ember::test::counted_malloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return ember::test::counted_malloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return ember::test::counted_malloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
