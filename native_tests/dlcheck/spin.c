/* libspin.so: its constructor says it has started (its PID, written to the FIFO $ELFPATCH_TEST_STARTED),
   then spins forever: what a CI timeout kills. dlcheck must take it down with itself. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void spin(void) __attribute__((constructor));
static void spin(void) {
    const char *fifo = getenv("ELFPATCH_TEST_STARTED");
    if (fifo) {
        char text[32];
        int n = snprintf(text, sizeof text, "%ld\n", (long)getpid());
        int fd = open(fifo, O_WRONLY);
        if (fd >= 0) {
            (void)write(fd, text, (size_t)n);
            close(fd);
        }
    }
    for (volatile unsigned long i = 0;; i++) {
    }
}
