/* Every fixture reports what runs as one line per event on stdout, written with write(2): stdio buffers
 * could reorder the output against code that runs at exit, and stdio itself may not be set up yet (or any
 * more) when initializers and finalizers run.
 *
 *   init TOKEN      an initializer ran (TOKEN: "<file>" for a translation unit's C++ globals,
 *                   "<file>@<priority>" for init_priority ones, the function name for attribute constructors)
 *   fini NAME       a finalizer function (attribute destructor, .fini_array/.dtors) ran
 *   dtor TOKEN      a C++ global's destructor ran (registered with __cxa_atexit by its initializer)
 *   preinit NAME    a .preinit_array entry ran
 *   mark WHAT       a point in main (main, dlopen-begin, ...)
 *   value K=V       a value the program observed
 *   slot OBJ KIND INDEX ADDR   run-time content of an array slot, minus the load bias (dump.c)
 */
#ifndef INIT_ORDER_TRACE_H
#define INIT_ORDER_TRACE_H
#include <string.h>
#include <unistd.h>

static inline void trace(const char *event, const char *what) {
  char line[256];
  size_t a = strlen(event), b = strlen(what);
  if (a + b + 2 > sizeof line) return;
  memcpy(line, event, a);
  line[a] = ' ';
  memcpy(line + a + 1, what, b);
  line[a + 1 + b] = '\n';
  ssize_t unused = write(1, line, a + b + 2);
  (void)unused;
}

#ifdef __cplusplus
/* A global whose constructor and destructor say so. */
struct Traced {
  explicit Traced(const char *token) : token_(token) { trace("init", token_); }
  ~Traced() { trace("dtor", token_); }
  const char *token_;
};

extern "C" void dump_slots(void);
#else
void dump_slots(void);
#endif
#endif
