/* inspect.c — `quantmake inspect MODEL [--json]`. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "onnx/model.h"
#include "util.h"

int cmd_inspect(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: quantmake inspect MODEL [--json]\n");
		return 2;
	}
	Model *m;
	if (model_load(argv[1], &m) < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		return 2;
	}
	printf("%s: ir_version %lld, opset %lld, %zu nodes\n", argv[1],
	       (long long)m->proto->ir_version, (long long)model_opset(m->proto, ""),
	       m->proto->graph->n_node);
	model_free(m);
	return 0;
}
