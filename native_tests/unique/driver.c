/* unique_driver LIB_A LIB_B: load two versions of the holder library with RTLD_LOCAL, report whether they
 * share Holder<int>::value, close both and report whether each is still resident.
 * Output, one key=value per line: a.version a.value b.version b.value shared a.resident b.resident */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*int_fn)(void);
typedef void *(*ptr_fn)(void);

static void *open_or_die(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        exit(2);
    }
    return h;
}

static void *sym_or_die(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (!p) {
        fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
        exit(2);
    }
    return p;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s LIB_A LIB_B\n", argv[0]);
        return 2;
    }
    void *a = open_or_die(argv[1]);
    void *b = open_or_die(argv[2]);
    int_fn a_version = (int_fn)sym_or_die(a, "fixture_version");
    int_fn b_version = (int_fn)sym_or_die(b, "fixture_version");
    int_fn a_value = (int_fn)sym_or_die(a, "holder_value");
    int_fn b_value = (int_fn)sym_or_die(b, "holder_value");
    ptr_fn a_addr = (ptr_fn)sym_or_die(a, "holder_address");
    ptr_fn b_addr = (ptr_fn)sym_or_die(b, "holder_address");
    printf("a.version=%d\na.value=%d\n", a_version(), a_value());
    printf("b.version=%d\nb.value=%d\n", b_version(), b_value());
    printf("shared=%s\n", a_addr() == b_addr() ? "yes" : "no");
    dlclose(b);
    dlclose(a);
    void *ra = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
    void *rb = dlopen(argv[2], RTLD_NOW | RTLD_NOLOAD);
    printf("a.resident=%s\nb.resident=%s\n", ra ? "yes" : "no", rb ? "yes" : "no");
    return 0;
}
