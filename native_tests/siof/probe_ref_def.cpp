#include "probe.hpp"
Box g_refd, g_t0, g_t1, g_getb;
Box& g_ref = g_refd;
extern Box* const g_tbl[2] = {&g_t0, &g_t1};
__attribute__((noinline)) Box& get_box() { return g_getb; }
