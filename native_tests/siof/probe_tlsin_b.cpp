#include "probe.hpp"
#include "probe_tlsin.hpp"
// Reaches t_inl's initialization after probe_tlsin_var.cpp ran it: it does not run again.
struct TlsInUser_b {
  TlsInUser_b() { report(PROBE_UNIT, "t_inl", t_inl.v >= 0); }
} g_tlsin_user_b;
