// Two units build g_share themselves (init_plain stores through its address) before reading it: no finding.
#include "probe.hpp"
struct Plain { int v; };
void init_plain(Plain* p);
Plain g_share;
struct ShareA { ShareA() { init_plain(&g_share); report(PROBE_UNIT, "g_share", g_share.v); } } g_share_a;
