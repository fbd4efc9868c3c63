// probe_tlsin: a thread_local whose initialization reads a global built last, touched first by its own unit
// (whose initializer GCC inlines the unit's __tls_init into) and later by another unit (through _ZTH).
#pragma once
struct TlsInReader {
  long v;
  TlsInReader();
};
extern thread_local TlsInReader t_inl;
extern Box g_tlsin;
