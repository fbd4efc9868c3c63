// An initializer that calls through a vtable: the analysis cannot follow it, so it says it is incomplete.
struct Source {
  virtual int get() const = 0;
};
Source* make_source();  // vcall_impl.cpp
int g_vcall = make_source()->get();
