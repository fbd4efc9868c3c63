// Shared by every no_destruction fixture: the trace, the canary-carrying type, and a NoDestructor wrapper.
#ifndef ND_HPP
#define ND_HPP

#include <cstdarg>
#include <cstdio>
#include <new>
#include <unistd.h>
#include <utility>

namespace nd {

// One trace line on file descriptor 1 with write(2): nothing sits in a stdio buffer when the process ends,
// and lines from destructors, atexit handlers and threads come out in the order they happened.
inline void trace(const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        (void)!write(1, buf, n < (int)sizeof buf ? (size_t)n : sizeof buf - 1);
}

constexpr unsigned kAlive = 0xA11CEu;
constexpr unsigned kDead = 0xDEADu;

// An object with a non-trivial destructor. The destructor clears the canary; a late user checks the canary
// (the memory is static storage or a leaked heap block, so still there) instead of dereferencing anything the
// destructor freed. A use after destruction is therefore reported every time, not hoped for as a crash.
class Tracked {
  public:
    explicit Tracked(const char *name) : name_(name) {
        canary_ = kAlive;
        trace("nd: construct %s\n", name_);
    }
    ~Tracked() {
        canary_ = kDead;  // volatile: GCC's -flifetime-dse may not drop this last store
        trace("nd: destroy %s\n", name_);
    }
    Tracked(const Tracked &) = delete;
    Tracked &operator=(const Tracked &) = delete;
    bool alive() const { return canary_ == kAlive; }
    const char *state() const { return alive() ? "alive" : "dead"; }

  private:
    const char *name_;
    volatile unsigned canary_;
};

// NoDestructor<T>: T constructed by placement new into aligned storage inside the wrapper, and never
// destroyed. The wrapper itself is trivially destructible, so the compiler registers no destructor at all
// (the pattern of absl::NoDestructor, Chromium's base::NoDestructor, WebKit's NeverDestroyed).
template <class T>
class NoDestructor {
  public:
    template <class... Args>
    explicit NoDestructor(Args &&...args) {
        ::new (static_cast<void *>(storage_)) T(std::forward<Args>(args)...);
    }
    NoDestructor(const NoDestructor &) = delete;
    NoDestructor &operator=(const NoDestructor &) = delete;
    T &operator*() { return *std::launder(reinterpret_cast<T *>(storage_)); }
    T *operator->() { return &**this; }

  private:
    alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace nd

// ND_plain, ND_leak or ND_nodestructor (set by the Makefile) picks how a fixture defines its global object.
#if defined(ND_plain)
#define ND_GLOBAL(name, label)                 \
    static nd::Tracked g_##name(label);        \
    static nd::Tracked &name() { return g_##name; }
#elif defined(ND_leak)
// The leaked pointer: `static T& t = *new T(...)`. The object lives until the process ends; its memory is
// never freed (one leak per load when the library is dlclosed and loaded again).
#define ND_GLOBAL(name, label)                          \
    static nd::Tracked &g_##name = *new nd::Tracked(label); \
    static nd::Tracked &name() { return g_##name; }
#elif defined(ND_nodestructor)
#define ND_GLOBAL(name, label)                          \
    static nd::NoDestructor<nd::Tracked> g_##name(label); \
    static nd::Tracked &name() { return *g_##name; }
#else
#error "build with -DND_plain, -DND_leak or -DND_nodestructor"
#endif

#endif
