/* libflood.so: its constructor writes $ELFPATCH_TEST_FLOOD_MIB MiB (default 1024) to stderr as one line,
   then a last word, then aborts: what is kept of the child's output must stay bounded. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void flood(void) __attribute__((constructor));
static void flood(void) {
    static char chunk[1 << 20];
    const char *env = getenv("ELFPATCH_TEST_FLOOD_MIB");
    long mib = env ? atol(env) : 1024;
    memset(chunk, 'x', sizeof chunk);
    for (long i = 0; i < mib; i++) {
        size_t done = 0;
        while (done < sizeof chunk) {
            ssize_t n = write(2, chunk + done, sizeof chunk - done);
            if (n <= 0)
                abort();
            done += (size_t)n;
        }
    }
    static const char last[] = " flood: the last word\n";
    (void)write(2, last, sizeof last - 1);
    abort();
}
