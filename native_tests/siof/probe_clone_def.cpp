#include "probe.hpp"
#include "probe_clone.hpp"
// GCC at -O2/-O3 builds these through constructor clones (nm: LocC2Ei.constprop.0): Solo's constructor is
// called for one object, so IPA-CP propagates `this` too and the clone takes no argument (the initializer
// jumps to it); Pair's is called for two objects with one constant argument, so the clone keeps `this`.
namespace {
struct Solo {
  long v;
  int cells[64];
  __attribute__((noinline)) Solo(int k) {
    v = 7;
    for (int i = 0; i < 64; ++i) cells[i] = i * k;
  }
};
struct Pair {
  long v;
  int cells[64];
  __attribute__((noinline)) Pair(int k) {
    v = 7;
    for (int i = 0; i < 64; ++i) cells[i] = i * k;
  }
};
Solo g_solo(3);
Pair g_pair_a(5), g_pair_b(5);
}  // namespace
// The reader reaches the objects (of types only this unit knows) through pointer globals.
long* const g_psolo = &g_solo.v;
long* const g_ppair = &g_pair_b.v;
