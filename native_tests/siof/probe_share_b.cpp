#include "probe.hpp"
struct Plain { int v; };
void init_plain(Plain* p);
extern Plain g_share;
struct ShareB { ShareB() { init_plain(&g_share); report(PROBE_UNIT, "g_share", g_share.v); } } g_share_b;
