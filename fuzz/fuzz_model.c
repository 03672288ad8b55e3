/* fuzz_model.c — the ONNX model loader: nesting check, protobuf-c unpack,
 * the canonical-encoding pass, then a re-encoding of what was loaded. */
#include <stdlib.h>

#include "onnx/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Model *m;
	if (model_parse(data, size, ".", &m) < 0)
		return 0;
	uint8_t *buf;
	size_t len;
	if (model_serialize(m, &buf, &len) == 0)
		free(buf);
	model_free(m);
	return 0;
}
