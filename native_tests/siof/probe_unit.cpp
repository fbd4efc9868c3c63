#include "probe.hpp"
extern Box g_same;
struct Early { Early() { report(PROBE_UNIT, "g_same", g_same.v); } } g_early;
Box g_same;
Box g_attr;
__attribute__((constructor)) static void attr_reader() { report(PROBE_UNIT, "g_attr", g_attr.v); }
