/* fuzz_rules.c — a rule file: the line-counting reader, libinih, key and
 * value checks, inheritance, releases. */
#include "fuzz.h"
#include "rules/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd = fuzz_file(data, size, path, sizeof path);
	if (fd < 0)
		return 0;
	Project *p;
	if (rules_load("/nonexistent-fuzz-root", path, &p) == 0)
		project_free(p);
	close(fd);
	return 0;
}
