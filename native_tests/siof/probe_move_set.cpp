#include "probe.hpp"
#include "probe_ptr.hpp"
// Linked first: moves g_pmove before probe_move_user.cpp reads through it, so its load-time value proves
// nothing there (the reader's entry must say it is incomplete).
struct Mover {
  Mover() { g_pmove = &g_moved_b; }
} g_mover;
