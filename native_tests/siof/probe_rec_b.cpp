#include "probe.hpp"
long k_walk();
struct RecB { RecB() { report(PROBE_UNIT, "g_rec", k_walk()); } } g_rec_b;
