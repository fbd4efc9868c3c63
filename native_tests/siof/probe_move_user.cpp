#include "probe.hpp"
#include "probe_ptr.hpp"
struct MoveUser {
  MoveUser() { report(PROBE_UNIT, "g_moved_b", g_pmove->v); }
} g_move_user;
