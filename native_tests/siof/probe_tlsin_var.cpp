#include "probe.hpp"
#include "probe_tlsin.hpp"
// Runs once per thread: here, in this unit's initializer (linked first), which sets the unit's TLS guard.
TlsInReader::TlsInReader() : v(g_tlsin.v) { report(PROBE_UNIT, "g_tlsin", v); }
thread_local TlsInReader t_inl;
struct TlsInUser_var {
  TlsInUser_var() { report(PROBE_UNIT, "t_inl", t_inl.v >= 0); }
} g_tlsin_user_var;
