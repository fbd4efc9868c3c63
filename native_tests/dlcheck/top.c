/* libtop.so: DT_NEEDED libmid.so; its own hook() preempts libmid's. */
int mid_call(void);
int hook(void) { return 2; }
int top_call(void) { return mid_call(); }
