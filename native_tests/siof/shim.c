/* LD_PRELOAD truth for `inits --dtors`: logs every __cxa_atexit / __cxa_thread_atexit_impl call whose
 * dso_handle belongs to the object named by SHIM_TARGET (a basename), one line each, to SHIM_LOG:
 *   atexit|thread_atexit DTOR OBJ
 * where a pointer into that object is printed as its link-time address (minus the load bias, as nm shows
 * it), a pointer elsewhere as ext:<dladdr symbol> (or ext:? ), and NULL as 0. Thread-local objects live in
 * the thread's TLS block, not in the file: printed as tls. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int target_of(const void *p, unsigned long *bias) {
  Dl_info info;
  struct link_map *map = NULL;
  const char *want = getenv("SHIM_TARGET");
  if (!p || !want || !dladdr1(p, &info, (void **)&map, RTLD_DL_LINKMAP) || !info.dli_fname) return 0;
  const char *base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  if (strcmp(base, want) != 0) return 0;
  *bias = map ? map->l_addr : 0;
  return 1;
}

static void show(char *out, size_t n, const void *p, const void *dso, int tls) {
  unsigned long bias;
  Dl_info info;
  if (!p) { snprintf(out, n, "0"); return; }
  if (target_of(p, &bias) && target_of(dso, &bias)) { snprintf(out, n, "%#lx", (unsigned long)p - bias); return; }
  if (tls) { snprintf(out, n, "tls"); return; }
  if (dladdr(p, &info) && info.dli_sname && info.dli_saddr == p) { snprintf(out, n, "ext:%s", info.dli_sname); return; }
  snprintf(out, n, "ext:?");
}

static void log_call(const char *kind, void (*fn)(void *), void *obj, void *dso, int tls) {
  unsigned long bias;
  const char *path = getenv("SHIM_LOG");
  if (!path || !target_of(dso, &bias)) return;
  char a[512], b[512], line[1100];
  show(a, sizeof a, (const void *)fn, dso, 0);
  show(b, sizeof b, obj, dso, tls);
  int len = snprintf(line, sizeof line, "%s %s %s\n", kind, a, b);
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd >= 0) { (void)!write(fd, line, (size_t)len); close(fd); }
}

int __cxa_atexit(void (*fn)(void *), void *obj, void *dso) {
  static int (*real)(void (*)(void *), void *, void *);
  if (!real) real = (int (*)(void (*)(void *), void *, void *))dlsym(RTLD_NEXT, "__cxa_atexit");
  log_call("atexit", fn, obj, dso, 0);
  return real(fn, obj, dso);
}

int __cxa_thread_atexit_impl(void (*fn)(void *), void *obj, void *dso) {
  static int (*real)(void (*)(void *), void *, void *);
  if (!real) real = (int (*)(void (*)(void *), void *, void *))dlsym(RTLD_NEXT, "__cxa_thread_atexit_impl");
  log_call("thread_atexit", fn, obj, dso, 1);
  return real(fn, obj, dso);
}
