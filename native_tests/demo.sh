#!/usr/bin/env bash
# `make demo`: two versions of one header-only library, loaded side by side with RTLD_LOCAL.
# Before elfpatch: they share one static and the first never unloads. After: isolated, and both unload.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
elfpatch=${ELFPATCH:-$here/../.venv/bin/elfpatch}
build=$here/unique/build
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$build/libholder_v1.so" "$build/libholder_v2.so" "$work/"

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
syms() { readelf -sW --dyn-syms "$1" | awk '$8 ~ /HolderIiE5value|_ZZ7counter/ {print "   ", $5, $8}' | c++filt | sort -u; }

step "Before: the unique symbols readelf sees in libholder_v1.so"
syms "$work/libholder_v1.so"
step "Before: load v1 then v2 with RTLD_LOCAL, close both, probe with RTLD_NOLOAD"
"$build/unique_driver" "$work/libholder_v1.so" "$work/libholder_v2.so" | sed 's/^/    /'
echo "    -> v2 reads v1's Holder<int>::value (b.value=1) and v1 stays resident after dlclose"

if "$elfpatch" dlcheck --help >/dev/null 2>&1; then
  step "elfpatch dlcheck says why"
  "$elfpatch" dlcheck "$work/libholder_v1.so" "$work/libholder_v2.so" | sed 's/^/    /' || true
fi

step "elfpatch unique (default: atomic rewrite of UNIQUE -> GLOBAL in .dynsym and .symtab)"
"$elfpatch" unique "$work/libholder_v1.so" "$work/libholder_v2.so" | sed 's/^/    /'

step "After: the same symbols"
syms "$work/libholder_v1.so"
step "After: the same load/close sequence"
"$build/unique_driver" "$work/libholder_v1.so" "$work/libholder_v2.so" | sed 's/^/    /'
echo "    -> each version sees its own value and both libraries unload"

step "elfpatch unique --check (the CI gate) now passes"
"$elfpatch" unique --check "$work/libholder_v1.so" "$work/libholder_v2.so" | sed 's/^/    /'

if "$elfpatch" dlcheck --help >/dev/null 2>&1; then
  step "elfpatch dlcheck after the patch"
  "$elfpatch" dlcheck "$work/libholder_v1.so" "$work/libholder_v2.so" | sed 's/^/    /' || true
fi

init=$here/init_order/build/gnu
if [ -x "$init/siof_ab" ] && [ -x "$init/siof_ba" ]; then
  step "elfpatch inits: the static initialization order fiasco is a matter of link order"
  for prog in siof_ab siof_ba; do
    echo "    $prog: $("$init/$prog" | grep user-saw-port)"
    "$elfpatch" inits "$init/$prog" | grep -E '_GLOBAL__sub_I' | sed 's/^/      /'
  done
fi

order=$here/siof/build/siof/O2
if [ -x "$order/cross_ba" ]; then
  step "elfpatch inits --siof: the fiasco found from the binary alone (nothing is run)"
  "$elfpatch" inits --siof --fail-on before-construction "$order/cross_ba" | sed -n '/static initialization order/,$p' \
    | sed 's/^/  /' && rc=0 || rc=$?
  echo "    -> exit status $rc: --fail-on before-construction makes it a CI gate"
  step "elfpatch inits --dtors: what runs at exit, in the order it runs"
  "$elfpatch" inits --dtors "$here/siof/build/gcc-O2/dtors" | sed -n '/exit-time destructors/,$p' | sed 's/^/  /'
fi
