#include "probe.hpp"
struct Plain { int v; };
extern Plain g_inited;
struct InitUser { InitUser() { report(PROBE_UNIT, "g_inited", g_inited.v); } } g_init_user;
