/* heap_check.c — src/heap.c: after heap_init(), a forked child's new heap
 * memory comes in transparent huge pages, and what the parent allocated
 * (and what it freed but had written) is left alone. Built by
 * tests/t_io_heap.sh without sanitizers (heap.c does nothing under
 * AddressSanitizer, whose allocator is not glibc's). Prints PASS/FAIL/SKIP. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heap.h"

enum { NKEEP = 64 };

/* kB of anonymous huge pages mapped in this process (-1: unknown) */
static long huge_kb(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	if (!f)
		return -1;
	char line[256];
	long kb = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static int thp_never(void)
{
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	if (!f)
		return 1;
	char line[128] = "";
	if (!fgets(line, sizeof line, f))
		line[0] = 0;
	fclose(f);
	return strstr(line, "[never]") != NULL || !line[0];
}

static size_t size_of(int i)
{
	return (size_t)(16 + 977 * i) << (i % 5);
}

/* 0 when every kept block still holds its pattern */
static int intact(unsigned char **keep)
{
	for (int i = 0; i < NKEEP; i++)
		for (size_t k = 0; k < size_of(i); k++)
			if (keep[i][k] != (unsigned char)(i * 7 + k))
				return -1;
	return 0;
}

int main(void)
{
	if (thp_never()) {
		printf("SKIP: heap huge pages: transparent huge pages are off on this system\n");
		return 0;
	}
	heap_init();
	unsigned char *keep[NKEEP];
	for (int i = 0; i < NKEEP; i++) {
		keep[i] = malloc(size_of(i));
		for (size_t k = 0; k < size_of(i); k++)
			keep[i][k] = (unsigned char)(i * 7 + k);
	}
	/* written, then freed into the heap's top: the child must not get
	 * these pages (shared with the parent) where it wants huge ones */
	void *volatile gone = malloc(3 << 20);
	memset(gone, 0x5a, 3 << 20);
	free(gone);
	long before = huge_kb();
	pid_t pid = fork();
	if (pid < 0) {
		printf("FAIL: heap huge pages: fork failed\n");
		return 1;
	}
	if (pid == 0) {
		if (intact(keep) < 0)
			_exit(3);
		/* what a stage child does: many tensors of 64 to 256 KiB */
		enum { NB = 96 };
		static unsigned char *b[NB];
		for (int i = 0; i < NB; i++) {
			size_t n = (size_t)(64 + 64 * (i % 4)) << 10;
			b[i] = malloc(n);
			memset(b[i], i, n);
		}
		long kb = huge_kb();
		for (int i = 0; i < NB; i++)
			free(b[i]);
		if (intact(keep) < 0)
			_exit(3);
		/* a further fork of this child works as well (the handler runs
		 * again on a heap that is already aligned) */
		pid_t p2 = fork();
		if (p2 == 0)
			_exit(intact(keep) < 0 ? 3 : 0);
		int st2;
		if (p2 < 0 || waitpid(p2, &st2, 0) != p2 || !WIFEXITED(st2) || WEXITSTATUS(st2) != 0)
			_exit(4);
		_exit(kb >= 2048 ? 0 : 2);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) {
		printf("FAIL: heap huge pages: the child died (signal %d)\n", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
		return 1;
	}
	int code = WEXITSTATUS(st);
	if (code == 3 || code == 4 || intact(keep) < 0)
		printf("FAIL: heap huge pages: blocks allocated before the fork changed%s\n",
		       code == 4 ? " (in a grandchild)" : "");
	else if (code == 2)
		printf("FAIL: heap huge pages: the child's 15 MiB of new blocks got no huge page (parent had %ld kB)\n",
		       before);
	else if (code != 0)
		printf("FAIL: heap huge pages: the child exited with %d\n", code);
	else
		printf("PASS: heap huge pages: a forked child's new blocks are in huge pages, older ones unchanged\n");
	return 0;
}
