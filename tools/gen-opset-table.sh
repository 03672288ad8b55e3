#!/bin/sh
# Turns src/preprocess/opset-history.txt (schema versions of the default-domain
# ONNX operators, written by tools/gen-opset-table.py) into the C table that
# preprocess.opset (src/preprocess/opset.c) reads. Run by the Makefile:
#   sh tools/gen-opset-table.sh src/preprocess/opset-history.txt > opset_table.c
set -e
awk '
BEGIN {
	print "/* opset_table.c: GENERATED at build time by tools/gen-opset-table.sh from"
	print " * src/preprocess/opset-history.txt; see that file. */"
	print "#include \"preprocess/opset.h\""
	print ""
	print "const OpHist opset_table[] = {"
}
/^#/ || NF == 0 { next }
{
	if (NF - 1 > 16) { print "opset-history.txt:" NR ": more than 16 versions of " $1 > "/dev/stderr"; exit 1 }
	line = "\t{\"" $1 "\", " (NF - 1) ", {"
	for (i = 2; i <= NF; i++) {
		n = split($i, p, ":")
		f = "0"
		for (k = 2; k <= n; k++) {
			fl = p[k] == "sig" ? "OPH_SIG" : p[k] == "dep" ? "OPH_DEP" : ""
			if (fl == "") { print "opset-history.txt:" NR ": unknown flag " p[k] > "/dev/stderr"; exit 1 }
			f = f == "0" ? fl : f "|" fl
		}
		line = line (i > 2 ? ", " : "") "{" p[1] ", " f "}"
	}
	print line "}},"
	rows++
}
END { print "};\n\nconst size_t opset_table_len = " rows ";" }
' "$1"
