/* nd_host [-t] [-c] LIB: a plain C host for the no_destruction libraries (no Python in the way).
 * Loads LIB with RTLD_NOW|RTLD_LOCAL; -t calls widget_start_thread(); -c dlcloses LIB before exiting.
 * The libraries' trace lines and the host's own (`nd: host ...`) go to stdout in order. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void say(const char *msg) {
    (void)!write(1, msg, strlen(msg));
}

int main(int argc, char **argv) {
    int thread = 0, close_it = 0, i;
    for (i = 1; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "-t"))
            thread = 1;
        else if (!strcmp(argv[i], "-c"))
            close_it = 1;
        else
            break;
    }
    if (i != argc - 1) {
        fprintf(stderr, "usage: %s [-t] [-c] LIB\n", argv[0]);
        return 2;
    }
    void *lib = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    say("nd: host loaded\n");
    if (thread) {
        int (*start)(void) = (int (*)(void))dlsym(lib, "widget_start_thread");
        if (!start || !start()) {
            fprintf(stderr, "widget_start_thread: %s\n", start ? "failed" : dlerror());
            return 2;
        }
        say("nd: host started thread\n");
    }
    if (close_it) {
        if (dlclose(lib) != 0) {
            fprintf(stderr, "dlclose: %s\n", dlerror());
            return 2;
        }
        say("nd: host closed\n");
    }
    say("nd: host exit\n");
    exit(0);
}
