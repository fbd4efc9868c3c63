// Depends on libholder_v1.so through DT_NEEDED: while libuser.so is loaded, libholder_v1.so is still referenced.
extern "C" int holder_value(void);
extern "C" int user_value(void) { return holder_value(); }
