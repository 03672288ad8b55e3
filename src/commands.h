/* commands.h — subcommands reached from main(); each takes the arguments
 * after its name (argv[0] is the subcommand) and returns the exit status:
 * 0 success, 1 failure of the work, 2 usage or input error. */
#ifndef QM_COMMANDS_H
#define QM_COMMANDS_H

/* quantmake inspect MODEL [--json] (src/onnx/inspect.c) */
int cmd_inspect(int argc, char **argv);
/* quantmake convert IN OUT [--external-data NAME] [--threshold BYTES] [--inline]
 * (src/onnx/convert.c) */
int cmd_convert(int argc, char **argv);

/* quantmake run MODEL [-i [NAME=]FILE]... [-d DIR] [-o OUT.npz] [--compare DIR]
 * [--bench N] [-t THREADS] (src/exec/run_cmd.c) */
int cmd_run(int argc, char **argv);

/* quantmake infer-shapes IN OUT [--strict] | --check-against-declared MODEL...
 * (src/infer/cmd.c) */
int cmd_infer_shapes(int argc, char **argv);

/* quantmake preprocess IN OUT [--passes LIST] [--opset N] [--fold-limit SIZE]
 * [--no-infer] (src/preprocess/cmd.c) */
int cmd_preprocess(int argc, char **argv);

/* quantmake release [--require-clean] [--require-git] [--force] [NAME...]: build and
 * pack releases; p and o come from the driver's global options
 * (src/release/cmd.c) */
struct Project;
struct BuildOpts;
int cmd_release(struct Project *p, const struct BuildOpts *o, int argc, char **argv);
/* quantmake verify-release ARCHIVE (src/release/cmd.c) */
int cmd_verify_release(int argc, char **argv);

#endif
