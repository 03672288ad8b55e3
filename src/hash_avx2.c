/* hash_avx2.c — XXH3-128 of a file descriptor with AVX2, from Debian's
 * header-only build of xxHash (XXH_INLINE_ALL). Debian's libxxhash is built
 * for baseline SSE2; this file is compiled with -mavx2 and used only when the
 * CPU has AVX2 (hash.c checks). Digests are identical by construction. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "hash_avx2.h"

int hash_fd_avx2(int fd, void *buf, size_t bufsz, int64_t size, unsigned char out[16])
{
	XXH3_state_t st;
	XXH3_INITSTATE(&st);
	XXH3_128bits_reset(&st);
	int64_t got = 0;
	while (size < 0 || got < size) {
		ssize_t n = read(fd, buf, bufsz);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		XXH3_128bits_update(&st, buf, (size_t)n);
		got += n;
	}
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(&st));
	memcpy(out, c.digest, 16);
	return 0;
}

