/* libchatty.so: its constructor calls dlsym $ELFPATCH_TEST_LOOKUPS times (default 1,000,000), and under
   LD_DEBUG=bindings the loader logs every lookup (~120 bytes each): a log of hundreds of MB that dlcheck must
   read in bounded memory. The same lookup each time, so the log has one distinct binding. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

int chatty_value(void) { return 3; }

static void chatter(void) __attribute__((constructor));
static void chatter(void) {
    const char *env = getenv("ELFPATCH_TEST_LOOKUPS");
    long count = env ? atol(env) : 1000000;
    for (long i = 0; i < count; i++)
        (void)dlsym(RTLD_DEFAULT, "chatty_value");
}
