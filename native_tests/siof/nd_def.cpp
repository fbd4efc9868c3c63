// No destruction: a NoDestructor-style wrapper and a leaked new. Nothing runs at exit, yet both are built
// by an initializer and can still be read too early.
#include <new>
#include "cfg.hpp"
template <class T> struct NoDestructor {
  NoDestructor() { new (storage) T(); }
  T* get() { return reinterpret_cast<T*>(storage); }
  alignas(T) unsigned char storage[sizeof(T)];
};
NoDestructor<Config> g_nd;
Config* g_leaked = new Config;
