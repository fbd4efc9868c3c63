// The program's globals and the pointers to them that its library loads (probe_xword_lib.cpp): the library
// reads each box through a word the program's relocations fill.
#include "probe.hpp"
Box g_wref_box, g_wtab_box, g_wptr_box, g_wfn_box, g_wset_box;
Box& g_wref = g_wref_box;
extern Box* const g_wtab[2] = {nullptr, &g_wtab_box};
Box* g_wptr = &g_wptr_box;
static int wfn_read() { return g_wfn_box.v; }
int (*g_wfn)() = wfn_read;
Box* g_wset = &g_wset_box;  // the library repoints it before it loads through it
struct DBox {
  Box b;
  ~DBox();
};
DBox::~DBox() { b.v = 0; }  // not empty: clang registers it
DBox g_wd_box;
DBox& g_wdref = g_wd_box;
int main() { return 0; }
