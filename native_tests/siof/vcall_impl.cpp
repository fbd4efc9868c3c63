#include <cstdlib>
struct Source {
  virtual int get() const = 0;
};
struct Impl : Source {
  int get() const override { return 3; }
};
struct Other : Source {
  int get() const override { return 4; }
};
// Which object (so which vtable) depends on the environment: what the call reaches is not known statically.
Source* make_source() {
  static Impl impl;
  static Other other;
  if (std::getenv("VCALL_OTHER")) return &other;
  return &impl;
}
