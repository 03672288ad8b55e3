/* hash_avx2.h — AVX2 file hashing (see hash_avx2.c). */
#ifndef QM_HASH_AVX2_H
#define QM_HASH_AVX2_H

#include <stddef.h>
#include <stdint.h>

/* XXH3-128 of fd from its position to EOF, reading through buf; 0 or -1 (errno) */
int hash_fd_avx2(int fd, void *buf, size_t bufsz, int64_t size, unsigned char out[16]);

#endif
