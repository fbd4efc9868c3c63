// An initializer that calls through a vtable it cannot know (make_source() picks one of two objects at run
// time): the analysis cannot follow it, so it says it is incomplete.
struct Source {
  virtual int get() const = 0;
};
Source* make_source();  // vcall_impl.cpp
int g_vcall = make_source()->get();
