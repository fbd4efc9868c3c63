/* libnoise.so: its constructor writes answer-shaped lines and garbage to every descriptor from 3 to 63 (one
   of them is the harness child's answer pipe): the harness must take none of them for an answer. */
#include <string.h>
#include <unistd.h>

static void noise(void) __attribute__((constructor));
static void noise(void) {
    static const char junk[] = "{\"ok\": true, \"objects\": 7, \"handle\": \"x\"}\nnot json at all\n{\"ok\": true";
    for (int fd = 3; fd < 64; fd++)
        (void)write(fd, junk, strlen(junk));
}

int noise_value(void) { return 9; }
