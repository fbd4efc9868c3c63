struct Source {
  virtual int get() const = 0;
};
struct Impl : Source {
  int get() const override { return 3; }
};
Source* make_source() {
  static Impl impl;
  return &impl;
}
