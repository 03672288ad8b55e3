/* fuzz_npz.c — an .npz file: minizip's central directory, stored and
 * deflated members (streamed .npy), libarchive for the rest. */
#include "exec/dataio.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_file(data, size, path, sizeof path);
	if (fd < 0)
		return 0;
	TensorList l;
	if (npz_read(path, &l) == 0)
		tl_free(&l);
	close(fd);
	return 0;
}
