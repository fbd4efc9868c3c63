#include "probe.hpp"
#include "probe_clone.hpp"
// Linked first: reads the objects probe_clone_def.cpp's constructor clones build, before they run.
struct CloneUser {
  CloneUser() {
    report(PROBE_UNIT, "_ZN12_GLOBAL__N_16g_soloE", *g_psolo);  // as the symbol table names it
    report(PROBE_UNIT, "_ZN12_GLOBAL__N_18g_pair_bE", *g_ppair);
  }
} g_clone_user;
