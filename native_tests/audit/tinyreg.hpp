// "tinyreg": a header-only library in two versions, as two packages vendor it. TINYREG_VERSION stands for the
// version a module was built against. GCC gives all three statics the binding STB_GNU_UNIQUE:
// - Registry<int>::slots: a static data member of a class template; version 2 doubles the array (st_size 16 vs
//   32), the dangerous case: a v2 module that binds to a v1 copy writes past its end.
// - instances()::n: a static local of an inline function, the same size in both versions.
// - Registry<int>::name: only modules that instantiate the template define it; _c.so refers to it (extern
//   template) and takes whichever copy the loader's unique table holds.
#ifndef TINYREG_VERSION
#error "build with -DTINYREG_VERSION=N"
#endif

template <class T>
struct Registry {
    static T slots[4 * TINYREG_VERSION];
    static const char* name;
};
template <class T>
T Registry<T>::slots[4 * TINYREG_VERSION] = {};
template <class T>
const char* Registry<T>::name = TINYREG_VERSION == 1 ? "tinyreg 1" : "tinyreg 2";

inline int& instances() {
    static int n = 0;
    return n;
}
