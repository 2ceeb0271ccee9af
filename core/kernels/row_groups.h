#pragma once
// Internal to core/kernels: how the multi-row sparse kernels cut n rows into groups of 8, 4, 2
// and 1 (8 row streams fill the vector registers of both AVX2 and AVX-512 kernels; smaller groups
// finish the rest without a per-row loop).

namespace ember {

// Calls group.template operator()<R>(first) for consecutive groups of R rows covering 0 .. n-1,
// R in 8, 4, 2, 1, in row order.
template <class Group>
inline void for_row_groups(int n, Group&& group) {
  int r = 0;
  for (; r + 8 <= n; r += 8) group.template operator()<8>(r);
  if (r + 4 <= n) { group.template operator()<4>(r); r += 4; }
  if (r + 2 <= n) { group.template operator()<2>(r); r += 2; }
  if (r < n) group.template operator()<1>(r);
}

}  // namespace ember
