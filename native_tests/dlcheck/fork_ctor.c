/* libfork_ctor.so: its constructor forks, and both copies return from dlopen (a library that daemonizes
   badly, or forks to probe something). The copy must not answer the harness's requests. */
#include <unistd.h>

static void split(void) __attribute__((constructor));
static void split(void) { (void)fork(); }

int fork_ctor_value(void) { return 5; }
