#include "probe.hpp"
long g_walk(int n);
struct RecA { RecA() { report(PROBE_UNIT, "g_rec", g_walk(2)); } } g_rec_a;
