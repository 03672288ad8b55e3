/* commands.h — subcommands reached from main(); each takes the arguments
 * after its name (argv[0] is the subcommand) and returns the exit status:
 * 0 success, 1 failure of the work, 2 usage or input error. */
#ifndef QM_COMMANDS_H
#define QM_COMMANDS_H

/* quantmake inspect MODEL [--json] (src/onnx/inspect.c) */
int cmd_inspect(int argc, char **argv);

#endif
