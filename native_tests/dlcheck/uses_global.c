/* libuses_global.so: refers to global_value() without a DT_NEEDED entry: only the global scope has it. */
int global_value(void);
int uses_global(void) { return global_value(); }
