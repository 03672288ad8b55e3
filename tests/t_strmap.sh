#!/bin/sh
# src/strmap.c, the hash map every name table of quantmake uses, checked
# against a plain list by tests/strmap_check.c (random adds and deletes of
# binary keys, string keys, owned copies, reserve, iteration), built here
# with AddressSanitizer and UBSan when the compiler has them.
. "$(dirname "$0")/lib/common.sh"
mktmp
CC=${CC:-cc}
XX=$(pkg-config --cflags --libs libxxhash 2>/dev/null || echo -lxxhash)
san="-fsanitize=address,undefined -fno-sanitize-recover=all"
echo 'int main(void){return 0;}' > "$TMPD/t.c"
$CC $san -o "$TMPD/t" "$TMPD/t.c" 2>/dev/null || san=
# shellcheck disable=SC2086
if ! $CC -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -Wno-unused-parameter $san -I"$ROOT/src" \
	-o "$TMPD/strmap_check" "$ROOT/tests/strmap_check.c" "$ROOT/src/strmap.c" "$ROOT/src/util.c" $XX \
	2> "$TMPD/err"; then
	fail "strmap" "cannot build tests/strmap_check.c: $(head -c 300 "$TMPD/err")"
	exit 0
fi
out=$("$TMPD/strmap_check" 2>&1)
st=$?
echo "$out"
[ $st -eq 0 ] || fail "strmap" "strmap_check exited with status $st"
echo "$out" | grep -q '^PASS: ' || echo "$out" | grep -q '^FAIL: ' || fail "strmap" "strmap_check printed no result"
