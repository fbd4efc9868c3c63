// A constant-initialized global that an initializer overwrites: ASan does not watch it (it has no dynamic
// initializer of its own), yet a unit that reads it first sees 10, not 20.
int compute_limit();
int g_limit = 10;
static int bump = (g_limit = compute_limit(), 0);
int compute_limit() { return 20 + bump; }
