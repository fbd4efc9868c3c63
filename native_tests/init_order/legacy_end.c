/* The 0 words that close the legacy .ctors and .dtors lists (crtend.o's __CTOR_END__ and __DTOR_END__). */
typedef void (*func_ptr)(void);
__attribute__((section(".ctors"), used, visibility("hidden"))) func_ptr __legacy_ctor_end[1] = {0};
__attribute__((section(".dtors"), used, visibility("hidden"))) func_ptr __legacy_dtor_end[1] = {0};
