#include "probe.hpp"
#include "probe_tls.hpp"
struct TlsUser_b {
  TlsUser_b() { report(PROBE_UNIT, "t_reader", t_reader.v >= 0); }
} g_tls_user_b;
