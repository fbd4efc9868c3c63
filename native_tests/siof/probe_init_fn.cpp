// A plain function that builds its argument: the only "constructor" g_inited has.
#include "probe.hpp"
struct Plain { int v; };
__attribute__((noinline)) void init_plain(Plain* p) { p->v = 7; }
