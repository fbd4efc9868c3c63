// probe_tls: a thread_local whose initialization reads another unit's global, reached from two units.
#pragma once
struct TlsReader {
  long v;
  TlsReader();
};
extern thread_local TlsReader t_reader;
extern Box g_tlsd;
