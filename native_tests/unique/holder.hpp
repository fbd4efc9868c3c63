// A header-only "library" in two versions. HOLDER_VERSION stands for the version a binary was built against.
// GCC gives both statics below the binding STB_GNU_UNIQUE: a static data member of a class template, and a
// static local of an inline function.
#ifndef HOLDER_VERSION
#error "build with -DHOLDER_VERSION=N"
#endif

template <class T>
struct Holder {
    static T value;
};
template <class T>
T Holder<T>::value = T(HOLDER_VERSION);  // _ZN6HolderIiE5valueE, constant-initialized to the version

inline int& counter() {
    static int c = 0;  // _ZZ7counterEvE1c
    return c;
}
