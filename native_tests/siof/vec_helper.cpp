// The only reads of g_table are VEX-encoded (vmovdqu/vpaddd [rip + g_table]) on x86-64: what a compiler
// emits for a struct or string copy from a global.
#include "vec.hpp"
#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2"))) int table_sum() {
  __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g_table.v));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
  s = _mm_hadd_epi32(s, s);
  s = _mm_hadd_epi32(s, s);
  return _mm_cvtsi128_si32(s);
}
#else
int table_sum() {
  const int* v = g_table.v;
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}
#endif
