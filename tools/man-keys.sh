#!/bin/sh
# Rewrites the RULE KEYS list of doc/quantmake.1 (between its BEGIN RULE KEYS
# and END RULE KEYS comments) with `quantmake keys --man`, the keys the rule
# files are checked against. Run after changing a key:
#   sh tools/man-keys.sh [./quantmake]
# tests/t_habits.sh fails while the page and the binary disagree.
set -e
Q=${1:-./quantmake}
PAGE=doc/quantmake.1
"$Q" keys --man > "$PAGE.keys.tmp"
awk -v keys="$PAGE.keys.tmp" '
/^\.\\" BEGIN RULE KEYS/ { print; while ((getline l < keys) > 0) print l; skip = 1; next }
/^\.\\" END RULE KEYS/ { skip = 0 }
!skip { print }
' "$PAGE" > "$PAGE.tmp"
rm -f "$PAGE.keys.tmp"
mv "$PAGE.tmp" "$PAGE"
