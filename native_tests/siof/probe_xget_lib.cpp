// The library's initializer calls the program's getter (through the PLT) and loads through the reference it
// returns: the program's initializers run last, so the box is not built yet.
#include "probe.hpp"
Box& get_box();
struct GetUser { GetUser() { report(PROBE_UNIT, "g_get_box", get_box().v); } } g_get_user;
