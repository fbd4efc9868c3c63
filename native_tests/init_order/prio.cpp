// Priorities: init_priority on C++ globals, constructor/destructor priorities on functions, and a
// .preinit_array entry (executables only; it runs before any shared library's initializer).
// Lower priorities initialize first and finalize last; 0-100 are reserved for the implementation.
#include "trace.h"

Traced prio_default("prio.cpp");
Traced prio_101 __attribute__((init_priority(101)))("prio.cpp@101");
Traced prio_2000 __attribute__((init_priority(2000)))("prio.cpp@2000");

extern "C" __attribute__((constructor(150))) void prio_ctor_150() { trace("init", "prio_ctor_150"); }
extern "C" __attribute__((constructor)) void prio_ctor() { trace("init", "prio_ctor"); }
extern "C" __attribute__((destructor(150))) void prio_fini_150() { trace("fini", "prio_fini_150"); }
extern "C" __attribute__((destructor)) void prio_fini() { trace("fini", "prio_fini"); }

static void prio_preinit(int, char **, char **) { trace("preinit", "prio_preinit"); }
__attribute__((section(".preinit_array"), used)) static void (*preinit_entry)(int, char **, char **) = prio_preinit;

int main() {
  trace("mark", "main");
  dump_slots();
  return 0;
}
