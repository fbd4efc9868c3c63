// Reads g_table (another unit's) one call away, in a third unit, only through AVX2 vector loads.
#include "vec.hpp"
struct VecUser {
  VecUser() : sum(table_sum()) {}
  int sum;
};
VecUser g_vec_user;
