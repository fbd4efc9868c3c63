/* Legacy .ctors/.dtors, the way GCC's crtstuff ran them before .init_array (gcc < 4.7, or a toolchain built
 * with --disable-initfini-array): a -1 word opens each list, a 0 word (legacy_end.c) closes it; _init calls
 * __do_global_ctors_aux, which runs .ctors from the last entry back to the first; _fini runs .dtors from the
 * first entry on. Today's crtbegin no longer walks .ctors and GNU ld folds .ctors into .init_array, so this
 * library is linked with lld (which keeps a separate .ctors) and brings its own copy of that crtstuff code.
 * x86-64 only (the .init/.fini fragments are x86-64 call instructions). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>

#include "trace.h"

typedef void (*func_ptr)(void);

__attribute__((section(".ctors"), used)) static func_ptr ctor_list[1] = {(func_ptr)-1};
__attribute__((section(".dtors"), used)) static func_ptr dtor_list[1] = {(func_ptr)-1};
extern func_ptr __legacy_ctor_end[] __attribute__((visibility("hidden")));

/* Print the relocated slot values (minus the load bias) before running them: the run-time truth. */
static void dump_legacy(const char *kind, func_ptr *list) {
  Dl_info info;
  struct link_map *map = NULL;
  if (!dladdr1((void *)list, &info, (void **)&map, RTLD_DL_LINKMAP) || !map)
    return;
  for (size_t i = 1; list[i] != 0 && list[i] != (func_ptr)-1; i++) {
    char buf[128];
    snprintf(buf, sizeof buf, "liblegacy.so %s %zu 0x%llx", kind, i,
             (unsigned long long)((ElfW(Addr))list[i] - map->l_addr));
    trace("slot", buf);
  }
}

__attribute__((used, noinline)) static void __do_global_ctors_aux(void) {
  dump_legacy("ctors", ctor_list);
  dump_legacy("dtors", dtor_list);
  for (func_ptr *p = __legacy_ctor_end - 1; *p != (func_ptr)-1; p--)
    (*p)();
}

__attribute__((used, noinline)) static void legacy_dtors_aux(void) {
  for (func_ptr *p = dtor_list + 1; *p; p++)
    (*p)();
}

/* What crtend.o/crtbegin.o used to put between crti's _init/_fini prologue and crtn's epilogue. */
__asm__(".pushsection .init,\"ax\",@progbits\n\tcall __do_global_ctors_aux\n\t.popsection");
__asm__(".pushsection .fini,\"ax\",@progbits\n\tcall legacy_dtors_aux\n\t.popsection");

/* A modern .init_array entry in the same library: it runs after _init, so after every .ctors entry. */
__attribute__((constructor)) static void legacy_modern_ctor(void) { trace("init", "legacy_modern_ctor"); }
__attribute__((destructor)) static void legacy_modern_fini(void) { trace("fini", "legacy_modern_fini"); }

int legacy_value(void) { return 42; }
