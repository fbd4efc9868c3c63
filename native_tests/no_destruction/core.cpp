// libnd_core.so: a core library whose global destructor logs through whatever logger registered itself.
// It does not link the logger; the logger links it (DT_NEEDED), so the loader initializes the core first and
// finalizes it last: its destructor runs after the logger's.
#include "nd.hpp"

static void (*g_log)(const char *);

extern "C" void core_set_logger(void (*log)(const char *)) { g_log = log; }

struct Core {
    Core() { nd::trace("nd: construct core\n"); }
    ~Core() {
        nd::trace("nd: destroy core\n");
        if (g_log)
            g_log("core shutting down");  // another library's object, used from this destructor
    }
};
static Core g_core;
