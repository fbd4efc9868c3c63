/* libother.so: DT_NEEDED libmid.so, which is already loaded when it comes: glibc then prints libmid's new
   scope only ("scope 2: libother.so libmid.so"), and libmid's earlier binding stays judged by the scopes in
   force when it was made. */
int mid_call(void);
int other_call(void) { return mid_call(); }
