#!/bin/sh
# src/strmap.c, the hash map every name table of quantmake uses, checked
# against a plain list by tests/strmap_check.c (random adds and deletes of
# binary keys, string keys, owned copies, reserve, iteration), built here
# with AddressSanitizer and UBSan when the compiler has them.
. "$(dirname "$0")/lib/common.sh"
mktmp
# shellcheck disable=SC2046
c_check strmap_check "$ROOT/src/strmap.c" "$ROOT/src/util.c" $(pkg-config --cflags --libs libxxhash 2>/dev/null || echo -lxxhash)
