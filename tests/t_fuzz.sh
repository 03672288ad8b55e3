#!/bin/sh
# The libFuzzer targets (fuzz/) build with clang and run: each on its
# seeded corpus for FUZZ_SECONDS (default 5) without a crash, a leak or a
# sanitizer report, and having run more than its seeds. Long runs are
# `make fuzz FUZZ_SECONDS=N`.
. "$(dirname "$0")/lib/common.sh"
mktmp
secs=${FUZZ_SECONDS:-5}
if ! command -v clang > /dev/null; then
	fail "fuzz targets" "clang is not installed (scripts/install-deps.sh)"
	exit 0
fi
# -O0: the optimized clang ASan build of the tree takes 20 minutes on two
# cores (conv.c alone most of it); the check is that they build and run
if ! make -C "$ROOT" -j2 fuzz-build FUZZ_OPT='-O0 -g' > "$TMPD/build" 2>&1; then
	fail "fuzz targets build with clang" "$(grep -m3 'error' "$TMPD/build" | head -c 600)"
	exit 0
fi
pass "fuzz targets build with clang"
for t in model rules npy npz pb archive; do
	# a fresh corpus each time: the seeds, not what earlier runs kept
	rm -rf "$TMPD/obj"
	mkdir -p "$TMPD/obj"
	ln -s "$ROOT/obj/fuzz/fuzz_$t" "$TMPD/obj/fuzz_$t"
	if sh "$ROOT/fuzz/run.sh" "$TMPD/obj" "$secs" "$t" > "$TMPD/out" 2>&1; then
		runs=$(sed -n 's/^fuzz: [a-z]*: \([0-9]*\) runs.*/\1/p' "$TMPD/out")
		seeds=$(ls "$TMPD/obj/corpus/$t" | wc -l) # the seeds and what the run added
		if [ -n "$runs" ] && [ "$runs" -gt "$seeds" ]; then
			pass "fuzz_$t runs ${secs}s clean ($runs runs, corpus of $seeds)"
		else
			fail "fuzz_$t runs ${secs}s clean" "${runs:-no} runs, corpus of $seeds: $(tail -c 300 "$TMPD/obj/fuzz-$t.log")"
		fi
	else
		fail "fuzz_$t runs ${secs}s clean" "$(grep -m5 -E 'ERROR|SUMMARY|crash' "$TMPD/obj/fuzz-$t.log" | head -c 600)"
	fi
done
