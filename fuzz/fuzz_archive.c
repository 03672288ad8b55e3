/* fuzz_archive.c — verify-release on an archive: every format libarchive
 * reads, entry kinds and names, the manifest's cap, its JSON and the
 * comparison (run with -close_fd_mask=3: it prints its findings). */
#include "commands.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_file(data, size, path, sizeof path);
	if (fd < 0)
		return 0;
	char *argv[] = {"verify-release", path, NULL};
	cmd_verify_release(2, argv);
	close(fd);
	return 0;
}
