// libnd_logger_<mode>.so: a global `logger` with a non-trivial destructor, registered with libnd_core.so (which
// it links) as the core's logger. At dlclose of this library, and at exit, the logger is destroyed before the
// core, and the core's destructor then logs through it.
// Trace line: `nd: late-use user=core object=logger state=alive|dead msg=core shutting down`.
#include "nd.hpp"

extern "C" void core_set_logger(void (*log)(const char *));

ND_GLOBAL(logger, "logger")

static void log_line(const char *msg) {
    nd::trace("nd: late-use user=core object=logger state=%s msg=%s\n", logger().state(), msg);
}

// Declared after the logger in the same file, so initialized after it: the logger exists when registered.
struct Registrar {
    Registrar() { core_set_logger(log_line); }
};
static Registrar g_registrar;

extern "C" const char *nd_mode(void) { return ND_MODE_NAME; }
extern "C" int logger_alive(void) { return logger().alive(); }
