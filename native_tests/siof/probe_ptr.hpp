// probe_ptr, probe_move: objects reached through writable pointer globals (see probe_ptr_user.cpp).
#pragma once
struct Reader {
  virtual long get() const = 0;
};
extern Box* g_pbox;
extern long (*g_fnp)();
extern Reader& g_reader;
extern Box* g_pmove;
extern Box g_moved_a, g_moved_b;
