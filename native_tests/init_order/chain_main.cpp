// The top of the dependency chain: its own initializers run after both libraries', its finalizers first.
#include "trace.h"

extern "C" int chain_mid_value();

Traced chain_main_global("chain_main.cpp");

extern "C" __attribute__((constructor)) void chain_main_ctor() { trace("init", "chain_main_ctor"); }
extern "C" __attribute__((destructor)) void chain_main_fini() { trace("fini", "chain_main_fini"); }

static void chain_preinit(int, char **, char **) { trace("preinit", "chain_preinit"); }
__attribute__((section(".preinit_array"), used)) static void (*preinit_entry)(int, char **, char **) = chain_preinit;

int main() {
  trace("mark", "main");
  dump_slots();
  return chain_mid_value() == 2 ? 0 : 1;
}
