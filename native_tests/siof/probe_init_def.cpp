#include "probe.hpp"
struct Plain { int v; };
void init_plain(Plain* p);
Plain g_inited;  // constant-initialized (zero); built by the call below
static int g_inited_once = (init_plain(&g_inited), 1);
int inited_once() { return g_inited_once; }
