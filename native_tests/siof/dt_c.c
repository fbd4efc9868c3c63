/* C's atexit(): a local stub (libc_nonshared.a) that calls __cxa_atexit(fn, NULL, __dso_handle). */
#include <stdlib.h>
static void c_bye(void) {}
__attribute__((constructor)) static void c_ctor(void) { atexit(c_bye); }
