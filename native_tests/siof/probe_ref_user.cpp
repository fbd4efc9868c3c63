#include "probe.hpp"
extern Box& g_ref;
extern Box* const g_tbl[2];
Box& get_box();
struct RefUser {
  RefUser() {
    report(PROBE_UNIT, "g_refd", g_ref.v);
    report(PROBE_UNIT, "g_t1", g_tbl[1]->v);
    report(PROBE_UNIT, "g_getb", get_box().v);
  }
} g_ref_user;
