#include "probe.hpp"
// One unit, three zero-initialized objects its initializer loads and then stores into (elfpatch's
// inits/filled.py tells them apart):
// - g_fill: a reader defined before it, built by an inlined constructor (-O1 and above: plain stores, no call)
//   that stores both members on every path: read before construction, a finding.
// - g_once: an aggregate without a constructor, filled only when a flag says it is not yet: a flag checked
//   before a build (zero by design), never a finding.
// - g_count: a counter incremented by two initializers: a read-modify-write of a zero-initialized scalar,
//   never a finding.
static volatile long seed = 7;
static void touch() { static volatile long sink; sink = seed; }
struct Fill {
  long a;
  long b;
  Fill() : a(seed) { touch(); b = 1; }
};
extern Fill g_fill;
struct FillReader {
  FillReader() { report(PROBE_UNIT, "g_fill", g_fill.b); }
} g_fill_reader;
Fill g_fill;

struct Once { long ready; long gen; };
Once g_once;
long g_count;
struct Decoys {
  Decoys() {
    if (!g_once.ready) {
      g_once.ready = 1;
      g_once.gen = seed;
    }
    ++g_count;
  }
} g_decoy_a, g_decoy_b;
