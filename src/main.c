/* main.c — command line: subcommands and make-style build options. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "util.h"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} commands[] = {
	{"inspect", cmd_inspect, "inspect MODEL [--json]   summarize an ONNX model"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: quantmake [-C DIR] [-f FILE] [-j N] [-k] [-n] [-B] [--explain] [TARGET...]\n"
		   "       quantmake COMMAND [ARGS...]\n\ncommands:\n");
	for (size_t i = 0; i < ARRAY_LEN(commands); i++)
		fprintf(f, "  %s\n", commands[i].help);
}

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "--version")) {
		printf("quantmake %s\n", QM_VERSION);
		return 0;
	}
	if (argc > 1)
		for (size_t i = 0; i < ARRAY_LEN(commands); i++)
			if (!strcmp(argv[1], commands[i].name))
				return commands[i].fn(argc - 1, argv + 1);
	usage(stderr);
	return 2;
}
