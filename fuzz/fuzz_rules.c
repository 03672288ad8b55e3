/* fuzz_rules.c — a rule file: the line-counting reader, libinih, key and
 * value checks, inheritance, releases. */
#include "fuzz.h"
#include "rules/rules.h"

static void one(const char *path)
{
	Project *p;
	if (rules_load("/nonexistent-fuzz-root", path, &p) == 0)
		project_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_on_file(data, size, one);
	return 0;
}
