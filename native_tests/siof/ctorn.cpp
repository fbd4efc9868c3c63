// A constructor(N) function reading a C++ global: it runs before every default-priority initializer, so
// before g_config is built, whatever the link order. ASan's checker does not bracket such functions.
#include "cfg.hpp"
int g_ctorn_saw;
__attribute__((constructor(101))) static void early_reader() { g_ctorn_saw = g_config.port; }
