/* Loads the library named on the command line (its initializers run) and exits. */
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
  if (argc < 2 || !dlopen(argv[1], RTLD_NOW)) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  return 0;
}
