#include "probe.hpp"
extern Box g_lib_box;
struct DepUser { DepUser() { report(PROBE_UNIT, "g_lib_box", g_lib_box.v); } } g_dep_user;
int main() { return 0; }
