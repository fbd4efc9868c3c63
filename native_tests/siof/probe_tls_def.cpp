#include "probe.hpp"
#include "probe_tls.hpp"
Box g_tlsd;  // built last: probe_tls_a.cpp's initializer reads it (through t_reader's initialization) first
