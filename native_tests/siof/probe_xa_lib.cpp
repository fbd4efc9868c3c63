// libA's own global, built by libA's initializer; libB reads it (probe_xb_lib.cpp).
#include "probe.hpp"
Box g_liba_box;
