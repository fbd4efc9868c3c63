#include "probe.hpp"
#include "probe_ptr.hpp"
// Linked first: reads, before probe_ptr_def.cpp's initializer builds them, objects it reaches only through
// writable globals holding their address from the load on (a pointer, a function pointer, an object's vptr).
struct PtrUser {
  PtrUser() {
    report(PROBE_UNIT, "g_ptrd", g_pbox->v);
    report(PROBE_UNIT, "g_fnd", g_fnp());
    report(PROBE_UNIT, "g_vird", g_reader.get());
  }
} g_ptr_user;
