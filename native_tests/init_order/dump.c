/* dump_slots(): print every loaded object's DT_PREINIT_ARRAY, DT_INIT_ARRAY and DT_FINI_ARRAY slots as the
 * loader left them (relocated), minus the object's load bias: the link-time function addresses that nm shows.
 * This is the run-time truth the tests compare elfpatch's relocation decoding against. */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "trace.h"

static void dump_array(const char *obj, const char *kind, ElfW(Addr) bias, ElfW(Addr) addr, size_t size) {
  const ElfW(Addr) *slots = (const ElfW(Addr) *)(bias + addr);
  for (size_t i = 0; i < size / sizeof(ElfW(Addr)); i++) {
    char buf[200];
    snprintf(buf, sizeof buf, "%s %s %zu 0x%llx", obj, kind, i, (unsigned long long)(slots[i] - bias));
    trace("slot", buf);
  }
}

/* Where the linker put the program's own arrays (defined in every executable): a static executable has no
 * PT_DYNAMIC, and its start-up code reads these instead. */
typedef void (*func_ptr)(void);
extern func_ptr __preinit_array_start[] __attribute__((weak, visibility("hidden")));
extern func_ptr __preinit_array_end[] __attribute__((weak, visibility("hidden")));
extern func_ptr __init_array_start[] __attribute__((weak, visibility("hidden")));
extern func_ptr __init_array_end[] __attribute__((weak, visibility("hidden")));
extern func_ptr __fini_array_start[] __attribute__((weak, visibility("hidden")));
extern func_ptr __fini_array_end[] __attribute__((weak, visibility("hidden")));

static void dump_static(ElfW(Addr) bias) {
  dump_array("main", "preinit_array", bias, (ElfW(Addr))__preinit_array_start - bias,
             (char *)__preinit_array_end - (char *)__preinit_array_start);
  dump_array("main", "init_array", bias, (ElfW(Addr))__init_array_start - bias,
             (char *)__init_array_end - (char *)__init_array_start);
  dump_array("main", "fini_array", bias, (ElfW(Addr))__fini_array_start - bias,
             (char *)__fini_array_end - (char *)__fini_array_start);
}

static int dump_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  (void)data;
  const char *name = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "main";
  const char *slash = strrchr(name, '/');
  const char *obj = slash ? slash + 1 : name;
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn && strcmp(obj, "main") == 0) {
    dump_static(info->dlpi_addr);
    return 0;
  }
  if (!dyn || strstr(obj, "linux-vdso") || strstr(obj, "linux-gate"))
    return 0;
  /* glibc rebases a few d_ptr tags in place (DT_STRTAB, ...) but not these three. */
  ElfW(Addr) pre = 0, init = 0, fini = 0;
  size_t pre_sz = 0, init_sz = 0, fini_sz = 0;
  for (; dyn->d_tag != DT_NULL; dyn++) {
    switch (dyn->d_tag) {
    case DT_PREINIT_ARRAY: pre = dyn->d_un.d_ptr; break;
    case DT_PREINIT_ARRAYSZ: pre_sz = dyn->d_un.d_val; break;
    case DT_INIT_ARRAY: init = dyn->d_un.d_ptr; break;
    case DT_INIT_ARRAYSZ: init_sz = dyn->d_un.d_val; break;
    case DT_FINI_ARRAY: fini = dyn->d_un.d_ptr; break;
    case DT_FINI_ARRAYSZ: fini_sz = dyn->d_un.d_val; break;
    }
  }
  if (pre) dump_array(obj, "preinit_array", info->dlpi_addr, pre, pre_sz);
  if (init) dump_array(obj, "init_array", info->dlpi_addr, init, init_sz);
  if (fini) dump_array(obj, "fini_array", info->dlpi_addr, fini, fini_sz);
  return 0;
}

void dump_slots(void) { dl_iterate_phdr(dump_object, NULL); }
