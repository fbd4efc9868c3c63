/* libglobal.so: opened with RTLD_GLOBAL (dlcheck --preload), it joins the global scope. */
int global_value(void) { return 7; }
