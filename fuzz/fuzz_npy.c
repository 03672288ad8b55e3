/* fuzz_npy.c — a .npy file: magic, header dict, shape and size checks. */
#include "exec/dataio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Tensor t;
	if (npy_parse(data, size, "fuzz.npy", &t) == 0)
		tensor_free(&t);
	return 0;
}
