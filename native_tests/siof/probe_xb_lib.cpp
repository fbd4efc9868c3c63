// libB's initializer reads libA's global through its GOT: early or not depending on which library the load
// initializes first (libA a dependency of libB: always first; else the reverse of their load order).
#include "probe.hpp"
extern Box g_liba_box;
struct XbUser { XbUser() { report(PROBE_UNIT, "g_liba_box", g_liba_box.v); } } g_xb_user;
