// An executable that defines unique symbols itself (exported with -rdynamic, so .dynsym carries them too).
#include <cstdio>
#include "holder.hpp"

int main() {
    std::printf("value=%d counter=%d\n", Holder<int>::value, ++counter());
    return 0;
}
