/* libspawn_crash.so: its constructor starts a helper process that inherits every descriptor (a fork without
   exec, as a library's worker pool or telemetry daemon may do) and lives on; its destructor crashes. The
   helper keeps every pipe of the harness child open, so the child's death must be seen some other way, and
   the helper must die with it. The helper's PID goes to $ELFPATCH_TEST_PIDFILE when that is set. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void start_helper(void) __attribute__((constructor));
static void start_helper(void) {
    pid_t pid = fork();
    if (pid == 0) {
        for (;;)
            pause();
    }
    const char *file = getenv("ELFPATCH_TEST_PIDFILE");
    if (pid > 0 && file) {
        FILE *f = fopen(file, "w");
        if (f) {
            fprintf(f, "%d\n", (int)pid);
            fclose(f);
        }
    }
}

static void crash(void) __attribute__((destructor));
static void crash(void) { raise(SIGSEGV); }
