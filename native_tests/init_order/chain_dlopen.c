/* Initializers that run at dlopen and finalizers that run at dlclose: loads libchain_mid.so (which pulls in
 * libchain_base.so) from the directory of argv[0], or the path in argv[1]. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "trace.h"

int main(int argc, char **argv) {
  char path[4096];
  if (argc > 1) {
    snprintf(path, sizeof path, "%s", argv[1]);
  } else {
    const char *slash = strrchr(argv[0], '/');
    int dir = slash ? (int)(slash - argv[0]) : 1;
    snprintf(path, sizeof path, "%.*s/libchain_mid.so", dir, slash ? argv[0] : ".");
  }
  trace("mark", "dlopen-begin");
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  trace("mark", "dlopen-end");
  dump_slots();
  trace("mark", "dlclose-begin");
  dlclose(h);
  trace("mark", "dlclose-end");
  return 0;
}
