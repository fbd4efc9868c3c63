#include "probe.hpp"
extern Box g_prog_box;
struct ExtUser { ExtUser() { report(PROBE_UNIT, "g_prog_box", g_prog_box.v); } } g_ext_user;
