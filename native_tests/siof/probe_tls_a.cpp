#include "probe.hpp"
#include "probe_tls.hpp"
struct TlsUser_a {
  TlsUser_a() { report(PROBE_UNIT, "t_reader", t_reader.v >= 0); }
} g_tls_user_a;
