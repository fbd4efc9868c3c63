// Exit-time destructor fixture: every way a translation unit registers a destructor during static
// initialization. The shim (shim.c) logs what is registered at run time; `inits --dtors` must list the same.
#pragma once
#include <string>

struct Tracked {
  Tracked(int v);
  ~Tracked();
  int v;
};

inline Tracked g_inline{7};  // C++17 inline variable: guarded, built by whichever unit runs first
template <class T> struct Holder { static Tracked value; };
template <class T> Tracked Holder<T>::value{3};  // template static member: guarded too

Tracked& local_static();  // a function-local static, built on first use (dt_b.cpp)
int tls_touch();          // reads a thread_local, which registers with __cxa_thread_atexit
