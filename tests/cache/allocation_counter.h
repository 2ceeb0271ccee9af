#pragma once
// The test binary's allocation counter (tests/support/counting_new.h, included once, in
// allocation_counter.cpp), for the checks that a path allocates nothing.
namespace ember::cache_test {
long allocations();
}
