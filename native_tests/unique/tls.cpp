// A thread_local with a non-trivial destructor. Touching it registers a TLS destructor through
// __cxa_thread_atexit_impl, and glibc keeps the object loaded until that destructor has run.
struct Tracker {
    int alive = 1;
    ~Tracker() { alive = 0; }
};
thread_local Tracker tracker;

extern "C" int tls_touch(void) { return tracker.alive; }
