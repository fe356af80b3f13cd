#!/bin/sh
# hardening_flags_test: libcollx.so was built with the hardening flags of cmake/CollxHardening.cmake.
# Usage: hardening_flags_test.sh READELF LIBRARY
#   full RELRO:       a GNU_RELRO segment and BIND_NOW (FLAGS BIND_NOW or FLAGS_1 NOW)
#   stack protector:  it calls __stack_chk_fail
#   FORTIFY_SOURCE:   it calls checked libc functions (__memcpy_chk, __snprintf_chk, ...)
set -u
readelf="$1"
lib="$2"
[ -f "$lib" ] || { echo "FAIL no library at $lib"; exit 1; }
segments=$("$readelf" -lW "$lib") || exit 1
dynamic=$("$readelf" -dW "$lib") || exit 1
symbols=$("$readelf" --dyn-syms -W "$lib") || exit 1
missing=""
echo "$segments" | grep -q 'GNU_RELRO' || missing="$missing GNU_RELRO(-z relro)"
echo "$dynamic" | grep -Eq '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW|\(BIND_NOW\)' || missing="$missing BIND_NOW(-z now)"
echo "$symbols" | grep -Eq ' __stack_chk_fail(@|$)' || missing="$missing __stack_chk_fail(-fstack-protector-strong)"
checked=$(echo "$symbols" | grep -Eo ' __[a-z0-9_]+_chk(@|$)' | tr -d ' @' | sort -u | tr '\n' ' ')
[ -n "$checked" ] || missing="$missing __*_chk(-D_FORTIFY_SOURCE)"
if [ -n "$missing" ]; then
  echo "FAIL $lib lacks:$missing"
  exit 1
fi
echo "ok   $lib: GNU_RELRO, BIND_NOW, __stack_chk_fail; checked functions: $checked"
