// libnd_widget_<mode>.so: a global `widget` with a non-trivial destructor and two users that outlive it:
//  - an atexit handler registered before the widget was constructed (so it runs after its destructor), and
//  - a worker thread still running when the process exits.
// Trace lines: `nd: late-use user=atexit|thread object=widget state=alive|dead`.
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "nd.hpp"

ND_GLOBAL(widget, "widget")  // dynamic initialization at the default priority

// -- the atexit user ------------------------------------------------------------------------------------

static void atexit_user() { nd::trace("nd: late-use user=atexit object=widget state=%s\n", widget().state()); }

// Priority 101 runs before the default-priority initializer that constructs the widget. atexit handlers and
// destructors run in the reverse order of registration (at exit, and at dlclose through __cxa_finalize), so
// this handler runs after ~Tracked.
__attribute__((constructor(101))) static void register_atexit_user() { atexit(atexit_user); }

// -- the thread user ------------------------------------------------------------------------------------

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static pthread_t g_thread;
static bool g_running, g_look_now;
static unsigned long g_uses;

static void *worker(void *) {
    pthread_mutex_lock(&g_mu);
    while (!g_look_now) {
        g_uses += widget().alive();  // the thread's ordinary work with the widget
        timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec += 1;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&g_cv, &g_mu, &until);
    }
    nd::trace("nd: late-use user=thread object=widget state=%s\n", widget().state());
    pthread_mutex_unlock(&g_mu);
    return nullptr;
}

extern "C" int widget_start_thread(void) {
    if (!g_running)
        g_running = pthread_create(&g_thread, nullptr, worker, nullptr) == 0;
    return g_running;
}

// Constructed before the widget (init_priority 102 < the default), so destroyed right after it: the point
// where a thread still running at exit next touches the widget. It makes the worker take that look now, then
// joins it, so the check is deterministic and no thread runs code from an unmapped library after dlclose.
struct LateLook {
    ~LateLook() {
        if (!g_running)
            return;
        pthread_mutex_lock(&g_mu);
        g_look_now = true;
        pthread_cond_signal(&g_cv);
        pthread_mutex_unlock(&g_mu);
        pthread_join(g_thread, nullptr);
        g_running = false;
    }
};
__attribute__((init_priority(102))) static LateLook g_late_look;

// -- for hosts and tests --------------------------------------------------------------------------------

extern "C" const char *nd_mode(void) { return ND_MODE_NAME; }
extern "C" int widget_alive(void) { return widget().alive(); }
