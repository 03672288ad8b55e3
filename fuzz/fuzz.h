/* fuzz.h — helpers of the libFuzzer targets in fuzz/ (see fuzz/README.md). */
#ifndef QM_FUZZ_H
#define QM_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* data as a file: an in-memory file (memfd) whose /proc path goes in
 * path; its descriptor, to close after use, or -1 */
static inline int fuzz_file(const uint8_t *data, size_t size, char *path, size_t n)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	for (size_t off = 0; off < size;) {
		ssize_t k = write(fd, data + off, size - off);
		if (k <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)k;
	}
	snprintf(path, n, "/proc/self/fd/%d", fd);
	return fd;
}

/* calls fn with the path of a file holding data (nothing when no
 * in-memory file can be made) */
static inline void fuzz_on_file(const uint8_t *data, size_t size, void (*fn)(const char *path))
{
	char path[64];
	int fd = fuzz_file(data, size, path, sizeof path);
	if (fd < 0)
		return;
	fn(path);
	close(fd);
}

#endif
