// `static bool ready = fill();`: the initializer calls a function (kept out of line) that fills a plain global
// table. On x86-64 the analysis only skims such callees at first, so the store must be confirmed by decoding.
#include "loop.hpp"
int g_lut[kLut];
static volatile int bias = 3;
__attribute__((noinline)) static bool fill_lut() {
  int b = bias;
  for (int i = 0; i < kLut; ++i) g_lut[i] = b + 2 * i;
  return true;
}
static bool g_lut_ready = fill_lut();
bool lut_ready() { return g_lut_ready; }
