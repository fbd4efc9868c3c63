// probe_clone: objects built by GCC's constructor clones (see probe_clone_def.cpp).
#pragma once
extern long* const g_psolo;
extern long* const g_ppair;
