#include "probe.hpp"
#include "probe_ptr.hpp"
Box g_moved_a, g_moved_b;
Box* g_pmove = &g_moved_a;
