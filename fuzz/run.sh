#!/bin/sh
# run.sh OBJDIR SECONDS TARGET...: seeds each target's corpus (once) from
# ONNX's test data and files made here, then runs the target for SECONDS
# (libFuzzer's -max_total_time). Exit 1 when a target fails (a crash, a
# leak, a sanitizer report): its input is kept as OBJDIR/crash-TARGET-*.
set -u
obj=$1 secs=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
TESTDATA=/usr/share/libonnx-testdata/data
status=0
for t in "$@"; do
	c=$obj/corpus/$t
	if [ ! -d "$c" ]; then
		mkdir -p "$c"
		sh "$here/seed.sh" "$t" "$c" "$TESTDATA" || { echo "fuzz: cannot seed $t" >&2; exit 1; }
	fi
	# the targets print what they refuse; -close_fd_mask=3 keeps that out
	if ! "$obj/fuzz_$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2560 -max_len=1048576 \
		-close_fd_mask=3 -artifact_prefix="$obj/crash-$t-" -print_final_stats=1 "$c" \
		> "$obj/fuzz-$t.log" 2>&1; then
		echo "fuzz: $t failed (see $obj/fuzz-$t.log)" >&2
		status=1
	fi
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$obj/fuzz-$t.log")
	echo "fuzz: $t: ${runs:-?} runs in ${secs}s"
done
exit $status
