/* fuzz_archive.c — verify-release on an archive: every format libarchive
 * reads, entry kinds and names, the manifest's cap, its JSON and the
 * comparison (run with -close_fd_mask=3: it prints its findings). */
#include "commands.h"
#include "fuzz.h"

static void one(const char *path)
{
	char *argv[] = {"verify-release", (char *)path, NULL};
	cmd_verify_release(2, argv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_on_file(data, size, one);
	return 0;
}
