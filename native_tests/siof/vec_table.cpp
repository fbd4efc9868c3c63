#include "vec.hpp"
static volatile int one = 1;
// No loop, so that the only thing this fixture tests is the vector loads (loops: loop_*.cpp).
Table::Table() {
  int k = one;
  v[0] = k, v[1] = 2 * k, v[2] = 3 * k, v[3] = 4 * k, v[4] = 5 * k, v[5] = 6 * k, v[6] = 7 * k, v[7] = 8 * k;
}
Table g_table;
