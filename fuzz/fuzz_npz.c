/* fuzz_npz.c — an .npz file: minizip's central directory, stored and
 * deflated members (streamed .npy), libarchive for the rest. */
#include "exec/dataio.h"
#include "fuzz.h"

static void one(const char *path)
{
	TensorList l;
	if (npz_read(path, &l) == 0)
		tl_free(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_on_file(data, size, one);
	return 0;
}
