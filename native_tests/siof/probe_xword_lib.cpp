// The library's initializers read the program's globals through pointers the program's own objects hold: a
// reference (RELRO), an entry of a constant pointer table, a writable pointer global and a function pointer
// (writable: the call through it may repoint it, its first load alone is judged). The program's initializers run last, so every box is read before it is built. A fifth pointer
// global the library repoints first, at its own box (built), before loading through it: no read of the
// program's box. The writable pointer global is read by an initializer of its own, which runs first (a
// priority sorts first) and calls none of the program's code: nothing can have repointed it.
#include "probe.hpp"
extern Box& g_wref;
extern Box* const g_wtab[2];
extern Box* g_wptr;
extern int (*g_wfn)();
extern Box* g_wset;
struct DBox {  // an object with a destructor: registered where it is built (named by that in a stripped file)
  Box b;
  ~DBox();
};
extern DBox& g_wdref;
Box g_lib_box;  // built before g_word_user (defined first in this unit)
struct WordUser {
  WordUser() {
    report(PROBE_UNIT, "g_wref_box", g_wref.v);
    report(PROBE_UNIT, "g_wtab_box", g_wtab[1]->v);
    report(PROBE_UNIT, "g_wfn_box", g_wfn());
    report(PROBE_UNIT, "g_wd_box", g_wdref.b.v);
    g_wset = &g_lib_box;
    report(PROBE_UNIT, "g_lib_box", g_wset->v);
  }
} g_word_user;
__attribute__((constructor(200))) static void read_wptr() { report(PROBE_UNIT, "g_wptr_box", g_wptr->v); }
