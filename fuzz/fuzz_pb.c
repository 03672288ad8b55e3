/* fuzz_pb.c — a .pb file of test data: a TensorProto, then the same
 * bytes as a SequenceProto and an OptionalProto (nesting checked first). */
#include "exec/dataio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const int kinds[] = {TK_TENSOR, TK_SEQUENCE, TK_OPTIONAL};
	for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
		Tensor t;
		if (pb_parse_kind(data, size, "fuzz.pb", kinds[i], &t) == 0)
			tensor_free(&t);
	}
	return 0;
}
