/* Linked with -Wl,-z,nodelete (DF_1_NODELETE): it stays resident for a reason elfpatch must not touch. */
int nodelete_answer(void) { return 42; }
