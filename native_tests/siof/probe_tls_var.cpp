#include "probe.hpp"
#include "probe_tls.hpp"
// Runs once per thread, in the first initializer that touches t_reader (probe_tls_a.cpp, linked first).
TlsReader::TlsReader() : v(g_tlsd.v) { report(PROBE_UNIT, "g_tlsd", v); }
thread_local TlsReader t_reader;
