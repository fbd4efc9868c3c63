// Globals that need no initializer, and globals that are never destroyed ("Safe Static Initialization, No
// Destruction"; Google's style rule on static destruction):
// - constinit/constexpr: constant-initialized at compile time, so the file gets no initializer for it;
// - a NoDestructor-style wrapper (absl::NoDestructor, base::NoDestructor, Firefox's NeverDestroyed) and a
//   leaked new: constructed by this file's one initializer, never destroyed, so nothing can use them after
//   their destruction at exit or dlclose.
#include <new>
#include <utility>

#include "trace.h"

struct Port {
  constexpr explicit Port(int v) : value(v) {}
  int value;
};
constinit Port kPort{8080};  // C++20: a compile error if this needed a dynamic initializer

template <typename T>
class NoDestructor {
 public:
  template <typename... Args>
  explicit NoDestructor(Args &&...args) { new (storage_) T(std::forward<Args>(args)...); }
  T &get() { return *reinterpret_cast<T *>(storage_); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

Traced plain("patterns.cpp");                          // constructed, destroyed at exit
NoDestructor<Traced> kept("patterns.cpp:kept");        // constructed, never destroyed
Traced &leaked = *new Traced("patterns.cpp:leaked");   // constructed, never destroyed

int main() {
  trace("mark", "main");
  dump_slots();
  return kPort.value == 8080 && kept.get().token_ && leaked.token_ ? 0 : 1;
}
