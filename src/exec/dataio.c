/* dataio.c — .npy, .npz, TensorProto .pb files and sample iteration
 * (see dataio.h).
 *
 * .npy layout (numpy's format.py): "\x93NUMPY", major, minor, a little-endian
 * header length (u16 in 1.0, u32 in 2.0 and 3.0), then a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
 * spaces and '\n' so the data starts at a multiple of 64, then the raw data. */
#include "exec/dataio.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unzip.h>
#include <zlib.h>

#include "onnx/pbdepth.h"
#include "util.h"

void tl_push(TensorList *l, Tensor *t)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 8;
		l->t = xreallocarray(l->t, l->cap, sizeof *l->t);
	}
	l->t[l->n++] = *t;
	memset(t, 0, sizeof *t);
}

void tl_free(TensorList *l)
{
	for (size_t i = 0; i < l->n; i++)
		tensor_free(&l->t[i]);
	free(l->t);
	memset(l, 0, sizeof *l);
}

/* ---- .npy ---- */

static const struct {
	const char *descr; /* without the byte-order character */
	int dt;
} npy_types[] = {
	{"f4", DT_FLOAT}, {"f8", DT_DOUBLE}, {"f2", DT_FLOAT16},
	{"i1", DT_INT8}, {"u1", DT_UINT8}, {"i2", DT_INT16}, {"u2", DT_UINT16},
	{"i4", DT_INT32}, {"u4", DT_UINT32}, {"i8", DT_INT64}, {"u8", DT_UINT64},
	{"b1", DT_BOOL}, {"c8", DT_COMPLEX64}, {"c16", DT_COMPLEX128},
};

/* the value text after 'key': in a header dict, or NULL */
static const char *dict_value(const char *h, const char *key)
{
	char k[32];
	size_t n = strlen(key);
	k[0] = k[n + 1] = '\'';
	memcpy(k + 1, key, n);
	k[n + 2] = 0;
	const char *p = strstr(h, k);
	if (!p) {
		k[0] = k[n + 1] = '"';
		p = strstr(h, k);
	}
	if (!p)
		return NULL;
	p += n + 2;
	while (isspace((unsigned char)*p))
		p++;
	if (*p != ':')
		return NULL;
	p++;
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

/* The bytes before a .npy's header dict, b[0..n) (n >= 12 or all there
 * is): *hoff gets the dict's offset, *hlen its length. */
static int npy_prefix(const unsigned char *b, size_t n, const char *what, size_t *hoff, size_t *hlen)
{
	if (n < 10 || memcmp(b, "\x93NUMPY", 6))
		return error("%s: not a .npy file (bad magic)", what);
	int major = b[6];
	if (major == 1) {
		*hlen = (size_t)b[8] | (size_t)b[9] << 8;
		*hoff = 10;
	} else if (major == 2 || major == 3) {
		if (n < 12)
			return error("%s: truncated .npy header", what);
		*hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
		*hoff = 12;
	} else {
		return error("%s: unsupported .npy format version %d.%d", what, major, b[7]);
	}
	return 0;
}

/* The header dict hd[0..hlen) of a .npy whose data is have bytes
 * (SIZE_MAX: not known yet): t allocated for it (data not filled). */
static int npy_header(const char *hd, size_t hlen, size_t have, const char *what, Tensor *t)
{
	/* numpy pads its dict to 64 bytes: most fit on the stack */
	char hb[256], *h = hlen < sizeof hb ? hb : xmalloc(hlen + 1);
	memcpy(h, hd, hlen);
	h[hlen] = 0;
	int r = -1;
	int dt = 0, rank = 0;
	int64_t dims[QM_MAX_RANK];
	const char *v = dict_value(h, "descr");
	if (!v || (*v != '\'' && *v != '"')) {
		if (v && *v == '[')
			error("%s: structured .npy dtypes are not supported", what);
		else
			error("%s: .npy header has no 'descr'", what);
		goto out;
	}
	char q = *v++;
	const char *e = strchr(v, q);
	if (!e || e - v > 15) {
		error("%s: malformed 'descr' in .npy header", what);
		goto out;
	}
	char descr[16];
	memcpy(descr, v, (size_t)(e - v));
	descr[e - v] = 0;
	char order = descr[0];
	const char *code = descr + 1;
	if (order != '<' && order != '>' && order != '|' && order != '=') {
		order = '=';
		code = descr;
	}
	if (code[0] == 'O') {
		error("%s: object arrays (dtype '%s') are not supported", what, descr);
		goto out;
	}
	if (code[0] == 'U' || code[0] == 'S' || code[0] == 'a') {
		error("%s: string arrays (dtype '%s') are not supported", what, descr);
		goto out;
	}
	for (size_t i = 0; i < ARRAY_LEN(npy_types); i++)
		if (!strcmp(code, npy_types[i].descr))
			dt = npy_types[i].dt;
	if (!dt) {
		error("%s: unsupported .npy dtype '%s'", what, descr);
		goto out;
	}
	if (order == '>' && dtype_bits(dt) > 8) {
		error("%s: big-endian data (dtype '%s') is not supported; save it little-endian", what, descr);
		goto out;
	}
	v = dict_value(h, "fortran_order");
	if (!v) {
		error("%s: .npy header has no 'fortran_order'", what);
		goto out;
	}
	if (!strncmp(v, "True", 4)) {
		error("%s: fortran_order arrays are not supported; save with np.ascontiguousarray", what);
		goto out;
	}
	if (strncmp(v, "False", 5)) {
		error("%s: malformed 'fortran_order' in .npy header", what);
		goto out;
	}
	v = dict_value(h, "shape");
	if (!v || *v != '(') {
		error("%s: .npy header has no 'shape' tuple", what);
		goto out;
	}
	for (v++;;) {
		while (isspace((unsigned char)*v) || *v == ',')
			v++;
		if (*v == ')')
			break;
		if (!isdigit((unsigned char)*v)) {
			error("%s: malformed 'shape' in .npy header", what);
			goto out;
		}
		if (rank == QM_MAX_RANK) {
			error("%s: rank exceeds the supported maximum %d", what, QM_MAX_RANK);
			goto out;
		}
		errno = 0;
		char *end;
		long long d = strtoll(v, &end, 10);
		if (errno || d < 0) {
			error("%s: dimension out of range in .npy header", what);
			goto out;
		}
		dims[rank++] = d;
		v = end;
	}
	/* check the size against the file before allocating anything */
	int64_t numel = shape_numel(rank, dims);
	if (numel < 0 || (numel > 0 && (uint64_t)numel > SIZE_MAX / 16)) {
		error("%s: shape in .npy header overflows", what);
		goto out;
	}
	size_t need = dtype_nbytes(dt, numel);
	if (have != SIZE_MAX && have != need) {
		char sb[128];
		error("%s: %s %s needs %zu bytes of data, the file has %zu (%s)", what, dtype_name(dt),
		      shape_str(rank, dims, sb, sizeof sb), need, have,
		      have < need ? "truncated" : "trailing bytes");
		goto out;
	}
	if (tensor_alloc(t, dt, rank, dims) < 0) {
		error_prefix("%s", what);
		goto out;
	}
	r = 0;
out:
	if (h != hb)
		free(h);
	return r;
}

int npy_parse(const void *buf, size_t len, const char *what, Tensor *t)
{
	const unsigned char *b = buf;
	size_t hoff = 0, hlen = 0;
	memset(t, 0, sizeof *t);
	if (npy_prefix(b, len, what, &hoff, &hlen) < 0)
		return -1;
	if (hlen > len - hoff)
		return error("%s: truncated .npy header (%zu bytes declared, %zu present)", what,
			     hlen, len - hoff);
	if (npy_header((const char *)b + hoff, hlen, len - hoff - hlen, what, t) < 0)
		return -1;
	if (t->nbytes)
		memcpy(t->data, b + hoff + hlen, t->nbytes);
	return 0;
}

int npy_read(const char *path, Tensor *t)
{
	char *data;
	size_t len;
	if (read_file(path, &data, &len) < 0)
		return -1;
	int r = npy_parse(data, len, path, t);
	free(data);
	return r;
}

int npy_encode(const Tensor *t, void **buf, size_t *len)
{
	if (t->kind != TK_TENSOR)
		return error("value '%s' is a %s, which .npy cannot hold (write a .pb)", t->name ? t->name : "",
			     tensor_kind_name(t->kind));
	const char *code = NULL;
	for (size_t i = 0; i < ARRAY_LEN(npy_types); i++)
		if (npy_types[i].dt == t->dtype)
			code = npy_types[i].descr;
	if (!code)
		return error("tensor '%s': %s has no .npy equivalent", t->name ? t->name : "",
			     dtype_name(t->dtype));
	StrBuf h = {0};
	sb_printf(&h, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
		  dtype_bits(t->dtype) == 8 ? '|' : '<', code);
	for (int i = 0; i < t->rank; i++)
		sb_printf(&h, "%lld%s", (long long)t->dims[i], t->rank == 1 ? "," : i + 1 < t->rank ? ", " : "");
	sb_puts(&h, "), }");
	while ((10 + h.len + 1) % 64)
		sb_putc(&h, ' ');
	sb_putc(&h, '\n');
	*len = 10 + h.len + t->nbytes;
	unsigned char *b = xmalloc(*len);
	memcpy(b, "\x93NUMPY\x01\x00", 8);
	b[8] = (unsigned char)(h.len & 0xff);
	b[9] = (unsigned char)(h.len >> 8);
	memcpy(b + 10, h.buf, h.len);
	if (t->nbytes)
		memcpy(b + 10 + h.len, t->data, t->nbytes);
	sb_release(&h);
	*buf = b;
	return 0;
}

int npy_write(const char *path, const Tensor *t)
{
	void *b;
	size_t n;
	if (npy_encode(t, &b, &n) < 0)
		return error_prefix("%s", path);
	int r = write_file_atomic(path, b, n);
	free(b);
	return r;
}

/* ---- .npz ---- */

static int is_positional(const char *name)
{
	if (strncmp(name, "arr_", 4) || !name[4])
		return 0;
	for (const char *p = name + 4; *p; p++)
		if (!isdigit((unsigned char)*p))
			return 0;
	return 1;
}

/* minizip reads the zip through these callbacks, from the file read whole
 * (one read(2); a zip reader on the file itself seeks and reads it over and
 * over: libarchive made 18 system calls of a 3 KiB sample). minizip 1.1 has
 * no memory reader of its own. The write, close and error callbacks are
 * required members of the table; nothing is written. */
typedef struct {
	const unsigned char *buf;
	size_t len, pos; /* pos <= len */
} MemZip;

static voidpf mz_open(voidpf opaque, const void *name, int mode)
{
	MemZip *m = opaque;
	m->pos = 0;
	return m;
}

static uLong mz_read(voidpf opaque, voidpf stream, void *buf, uLong size)
{
	MemZip *m = stream;
	size_t n = m->len - m->pos;
	if (n > size)
		n = size;
	if (n)
		memcpy(buf, m->buf + m->pos, n);
	m->pos += n;
	return (uLong)n;
}

static uLong mz_write(voidpf opaque, voidpf stream, const void *buf, uLong size)
{
	return 0;
}

static ZPOS64_T mz_tell(voidpf opaque, voidpf stream)
{
	return ((MemZip *)stream)->pos;
}

/* 0, or -1 for a position outside the buffer (a damaged offset). minizip
 * steps back with a negative offset cast to ZPOS64_T (as fseeko takes it),
 * so the offset is read as signed. */
static long mz_seek(voidpf opaque, voidpf stream, ZPOS64_T off, int origin)
{
	MemZip *m = stream;
	size_t base;
	switch (origin) {
	case ZLIB_FILEFUNC_SEEK_SET: base = 0; break;
	case ZLIB_FILEFUNC_SEEK_CUR: base = m->pos; break;
	case ZLIB_FILEFUNC_SEEK_END: base = m->len; break;
	default: return -1;
	}
	int64_t d = (int64_t)off;
	if (d < 0 ? (uint64_t)-(d + 1) >= base : (uint64_t)d > m->len - base)
		return -1;
	m->pos = d < 0 ? base - (size_t)-(d + 1) - 1 : base + (size_t)d;
	return 0;
}

static int mz_close(voidpf opaque, voidpf stream)
{
	return 0;
}

static int mz_error(voidpf opaque, voidpf stream)
{
	return 0;
}

/* what a negative code of unzOpenCurrentFile/unzReadCurrentFile means */
static const char *unz_problem(int e)
{
	switch (e) {
	case UNZ_ERRNO: return "its data runs past the end of the file (truncated)";
	case UNZ_BADZIPFILE: return "its local header is missing or disagrees with the central directory";
	case Z_DATA_ERROR: return "its deflate data is corrupt";
	case Z_BUF_ERROR: return "its deflate data ends early (truncated)";
	case Z_MEM_ERROR: return "out of memory inflating it";
	default: return "cannot read it";
	}
}

/* The current member, opened and stored: its bytes taken where they lie
 * in file, their CRC checked here (minizip would copy them through a
 * buffer of its own into one of ours: two copies of every sample, and a
 * malloc). */
static int npz_stored(unzFile z, const char *path, const char *file, size_t flen, const unz_file_info64 *fi,
		      const char *name, const char **data, size_t *len, char **own)
{
	ZPOS64_T off = unzGetCurrentFileZStreamPos64(z);
	size_t size = (size_t)fi->uncompressed_size;
	unzCloseCurrentFile(z);
	if (fi->compressed_size != fi->uncompressed_size)
		return error("%s: member '%s': stored, yet its header says %llu bytes in %llu (damaged zip)", path,
			     name, (unsigned long long)fi->uncompressed_size, (unsigned long long)fi->compressed_size);
	if (off > flen || size > flen - off)
		return error("%s: member '%s': %s", path, name, unz_problem(UNZ_ERRNO));
	if (crc32_z(0, (const Bytef *)file + off, size) != fi->crc)
		return error("%s: member '%s': CRC mismatch, its data is corrupt", path, name);
	*data = file + off;
	*len = size;
	*own = NULL;
	return 0;
}

/* reads up to n bytes of a member's inflated data: the count (0 at its
 * end), or -1 after error() */
typedef long (*MemberRead)(void *ud, void *buf, size_t n);

/* fills buf with n bytes from rd; the count read (less at the end), or -1 */
static long read_full(MemberRead rd, void *ud, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		size_t want = n - got < (1u << 30) ? n - got : (1u << 30);
		long k = rd(ud, (char *)buf + got, want);
		if (k < 0)
			return -1;
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (long)got;
}

/* the largest .npy header dict read from a compressed member (numpy's are
 * 64-byte multiples; structured dtypes, which are refused, make longer) */
enum { NPY_MAX_HEADER = 1 << 20 };

/* A compressed member as .npy, streamed: the header is read first and its
 * data size checked against size (the member's uncompressed size from the
 * zip directory; UINT64_MAX when unknown) before anything more is
 * inflated, then the data lands in the tensor itself, and a byte past it
 * is an error. So a small file that inflates to gigabytes ("zip bomb")
 * costs nothing unless its header declares that much data, and then
 * exactly that. */
static int npy_stream(MemberRead rd, void *ud, uint64_t size, const char *what, Tensor *t)
{
	unsigned char pre[12];
	memset(t, 0, sizeof *t);
	long got = read_full(rd, ud, pre, sizeof pre);
	if (got < 0)
		return -1;
	size_t hoff, hlen;
	if (npy_prefix(pre, (size_t)got, what, &hoff, &hlen) < 0)
		return -1;
	if (hlen > NPY_MAX_HEADER)
		return error("%s: .npy header of %zu bytes, over the limit of %d", what, hlen, NPY_MAX_HEADER);
	if (size != UINT64_MAX && hoff + hlen > size)
		return error("%s: truncated .npy header (%zu bytes declared, %llu present)", what, hlen,
			     (unsigned long long)(size - hoff));
	char *h = xmalloc(hlen + 1);
	size_t have = (size_t)got - hoff; /* header bytes already in pre */
	if (have > hlen)
		have = hlen;
	memcpy(h, pre + hoff, have);
	long more = read_full(rd, ud, h + have, hlen - have);
	int r = -1;
	if (more < 0)
		goto out;
	if ((size_t)more < hlen - have) {
		error("%s: truncated .npy header (%zu bytes declared, %zu present)", what, hlen, have + (size_t)more);
		goto out;
	}
	/* bytes of data that came with the prefix (a header shorter than 2) */
	size_t early = (size_t)got > hoff + hlen ? (size_t)got - hoff - hlen : 0;
	size_t data = size == UINT64_MAX ? SIZE_MAX : (size_t)(size - hoff - hlen);
	if (npy_header(h, hlen, data, what, t) < 0)
		goto out;
	if (early > t->nbytes) {
		error("%s: trailing bytes after the .npy data", what);
		goto out;
	}
	if (early)
		memcpy(t->data, pre + hoff + hlen, early);
	long k = read_full(rd, ud, (char *)t->data + early, t->nbytes - early);
	if (k < 0)
		goto out;
	if ((size_t)k < t->nbytes - early) {
		error("%s: holds %zu of the %zu bytes of data its .npy header says (truncated)", what,
		      early + (size_t)k, t->nbytes);
		goto out;
	}
	char extra;
	k = rd(ud, &extra, 1);
	if (k < 0)
		goto out;
	if (k > 0) {
		error("%s: inflates to more than its .npy header says (%zu bytes of data)", what, t->nbytes);
		goto out;
	}
	r = 0;
out:
	free(h);
	if (r < 0)
		tensor_free(t);
	return r;
}

typedef struct {
	unzFile z;
	const char *what;
} UnzRead;

static long unz_rd(void *ud, void *buf, size_t n)
{
	UnzRead *u = ud;
	int k = unzReadCurrentFile(u->z, buf, (unsigned)(n < (1u << 30) ? n : (1u << 30)));
	return k < 0 ? error("%s: %s", u->what, unz_problem(k)) : k;
}

typedef struct {
	struct archive *a;
	const char *what;
} ArcRead;

static long arc_rd(void *ud, void *buf, size_t n)
{
	ArcRead *r = ud;
	la_ssize_t k = archive_read_data(r->a, buf, n);
	if (k < 0) {
		const char *m = archive_error_string(r->a);
		return error("%s: %s", r->what, m ? m : "unknown libarchive error");
	}
	return (long)k;
}

/* The current member (stored or deflated): only a regular file,
 * unencrypted, its CRC checked. A stored member's bytes lie in file (the
 * whole file, flen bytes): *data and *len point there; a deflated one is
 * streamed into *t as .npy (npy_stream), *len 0. 0 for a member read, 2
 * for a directory entry (skipped), -1 after error(). */
static int npz_member_read(unzFile z, const char *path, const char *file, size_t flen, const unz_file_info64 *fi,
			   const char *name, const char **data, size_t *len, Tensor *t)
{
	unsigned host = (unsigned)(fi->version >> 8) & 0xff, mode = (unsigned)(fi->external_fa >> 16);
	size_t nl = strlen(name);
	int unix_type = host == 3 && (mode & S_IFMT); /* made on Unix: st_mode in the high half */
	if ((nl && name[nl - 1] == '/') || (unix_type ? S_ISDIR(mode) : (fi->external_fa & 0x10) != 0))
		return 2;
	if (unix_type && !S_ISREG(mode))
		return error("%s: member '%s' is %s, not a regular file (expected .npy data)", path, name,
			     S_ISLNK(mode) ? "a symbolic link" : "a special file");
	if (fi->flag & 1)
		return error("%s: member '%s' is encrypted (expected plain .npy data)", path, name);
	/* deflate expands at most 1032 times: a larger size is a damaged
	 * header, refused before it is allocated */
	uint64_t most = fi->compression_method == 0 ? flen : (uint64_t)flen * 1032;
	if (fi->uncompressed_size > most || fi->uncompressed_size > SIZE_MAX - 1)
		return error("%s: member '%s': its header says %llu bytes, more than a %zu-byte file can hold (damaged zip)",
			     path, name, (unsigned long long)fi->uncompressed_size, flen);
	int e = unzOpenCurrentFile(z);
	if (e != UNZ_OK)
		return error("%s: member '%s': %s", path, name, unz_problem(e));
	if (fi->compression_method == 0) {
		char *own = NULL;
		return npz_stored(z, path, file, flen, fi, name, data, len, &own);
	}
	char *what = xasprintf("%s: member '%s'", path, name);
	UnzRead u = {z, what};
	int r = npy_stream(unz_rd, &u, fi->uncompressed_size, what, t);
	free(what);
	/* the CRC is checked here, once every byte has been read */
	if (unzCloseCurrentFile(z) == UNZ_CRCERROR && r == 0) {
		tensor_free(t);
		return error("%s: member '%s': CRC mismatch, its data is corrupt", path, name);
	}
	*len = 0;
	return r;
}

/* t, read from a member, appended to out under the member's name
 * (without ".npy"; arr_N is positional, so unnamed) */
static void npz_push(const char *name, Tensor *t, TensorList *out)
{
	size_t nl = strlen(name);
	if (nl > 4 && !strcmp(name + nl - 4, ".npy"))
		nl -= 4;
	t->name = xstrndup(name, nl);
	if (is_positional(t->name)) {
		free(t->name);
		t->name = NULL;
	}
	tl_push(out, t);
}

/* One member's bytes, parsed as .npy and appended to out. */
static int npz_add(const char *path, const char *name, const char *data, size_t len, TensorList *out)
{
	char *what = xasprintf("%s: member '%s'", path, name);
	Tensor t;
	int pr = npy_parse(data, len, what, &t);
	free(what);
	if (pr < 0)
		return -1;
	npz_push(name, &t, out);
	return 0;
}


/* minizip reads what numpy writes: members stored or deflated, their
 * list from the central directory (so a file cut short is refused, not
 * read in part). Debian's minizip (1.1 of 2010), though, compares a zip64
 * extra field's placeholders with (unsigned long)-1, 2^64-1 on 64-bit
 * Linux, so it never reads the 64-bit size of a member of 4 GiB or more,
 * nor the offset of one past 4 GiB (numpy writes such fields for arrays
 * that large); and it lacks bzip2, lzma, xz and zstd. An archive with a
 * central directory entry carrying a zip64 extra field (id 1), or another
 * compression method, goes to libarchive as before: loaded only then. */
static int has_zip64_extra(const unsigned char *x, size_t n)
{
	for (size_t i = 0; i + 4 <= n; i += 4 + (size_t)(x[i + 2] | x[i + 3] << 8))
		if ((x[i] | x[i + 1] << 8) == 1)
			return 1;
	return 0;
}

/* libarchive's message of a, without the newline some end with */
static const char *la_err(struct archive *a, char *buf, size_t n)
{
	const char *m = archive_error_string(a);
	snprintf(buf, n, "%s", m ? m : "unknown error");
	for (size_t l = strlen(buf); l && buf[l - 1] == '\n'; l--)
		buf[l - 1] = 0;
	return buf;
}

/* The archive of path, read whole into file, through libarchive. */
static int npz_read_libarchive(const char *path, const char *file, size_t flen, TensorList *out)
{
	struct archive_entry *ent;
	char eb[512];
	int r = -1;
	struct archive *a = archive_read_new();
	archive_read_support_format_zip(a);
	if (archive_read_open_memory(a, file, flen) != ARCHIVE_OK) {
		error("%s: not a valid .npz (zip) file: %s", path, la_err(a, eb, sizeof eb));
		goto out;
	}
	for (;;) {
		int e = archive_read_next_header(a, &ent);
		if (e == ARCHIVE_EOF)
			break;
		if (e != ARCHIVE_OK && e != ARCHIVE_WARN) {
			error("%s: not a valid .npz (zip) file: %s", path, la_err(a, eb, sizeof eb));
			goto out;
		}
		const char *name = archive_entry_pathname(ent);
		if (!name || archive_entry_filetype(ent) != AE_IFREG)
			continue;
		char *what = xasprintf("%s: member '%s'", path, name);
		ArcRead ar = {a, what};
		Tensor t;
		int pr = npy_stream(arc_rd, &ar, archive_entry_size_is_set(ent) ? (uint64_t)archive_entry_size(ent)
								      : UINT64_MAX, what, &t);
		free(what);
		if (pr < 0)
			goto out;
		npz_push(name, &t, out);
	}
	r = 0;
out:
	archive_read_free(a);
	return r;
}

/* The archive of path, read whole into file, through minizip: 0, -1 after
 * error(), or 1 when it is one for libarchive (see has_zip64_extra). */
static int npz_read_minizip(const char *path, const char *file, size_t flen, TensorList *out)
{
	MemZip m = {(const unsigned char *)file, flen, 0};
	zlib_filefunc64_def io = {mz_open, mz_read, mz_write, mz_tell, mz_seek, mz_close, mz_error, &m};
	unzFile z = unzOpen2_64(path, &io);
	unz_global_info64 gi;
	if (!z || unzGetGlobalInfo64(z, &gi) != UNZ_OK) {
		if (z)
			unzClose(z);
		/* an empty zip is an end record alone, which minizip misses at
		 * offset 0 */
		if (flen >= 22 && !memcmp(file, "PK\5\6", 4))
			return 0;
		return error("%s: not a valid .npz (zip) file: no zip central directory (truncated, or not a zip)",
			     path);
	}
	int r = 0, e = gi.number_entry ? unzGoToFirstFile(z) : UNZ_END_OF_LIST_OF_FILE;
	size_t k = 0; /* the member, for the error */
	while (e == UNZ_OK) {
		/* each call reads the entry again a byte at a time: one call
		 * when the name and extra field fit the buffers (numpy's do) */
		unz_file_info64 fi;
		char nbuf[256], *name = nbuf;
		const char *data = NULL;
		Tensor t = {0};
		unsigned char xbuf[256], *extra = xbuf;
		size_t len = 0;
		if ((e = unzGetCurrentFileInfo64(z, &fi, nbuf, sizeof nbuf, xbuf, sizeof xbuf, NULL, 0)) != UNZ_OK)
			break;
		if (fi.size_filename >= sizeof nbuf || fi.size_file_extra > sizeof xbuf) {
			name = xmalloc(fi.size_filename + 1 + fi.size_file_extra);
			extra = (unsigned char *)name + fi.size_filename + 1;
			e = unzGetCurrentFileInfo64(z, NULL, name, fi.size_filename + 1, extra, fi.size_file_extra,
						    NULL, 0);
		}
		name[fi.size_filename] = 0;
		if (e != UNZ_OK)
			;
		else if (has_zip64_extra(extra, fi.size_file_extra) ||
			 (fi.compression_method != 0 && fi.compression_method != Z_DEFLATED))
			r = 1;
		else if ((r = npz_member_read(z, path, file, flen, &fi, name, &data, &len, &t)) == 0) {
			if (data)
				r = npz_add(path, name, data, len, out);
			else
				npz_push(name, &t, out);
		} else if (r == 2) {
			r = 0; /* a directory entry */
		}
		if (name != nbuf)
			free(name);
		if (e != UNZ_OK || r != 0)
			break;
		e = unzGoToNextFile(z);
		k++;
	}
	/* 65535 entries in the end record may mean more (a zip without zip64
	 * that overflowed it): minizip then reads entries until one is not */
	if (gi.number_entry == 0xffff && k >= 0xffff && e == UNZ_BADZIPFILE)
		e = UNZ_END_OF_LIST_OF_FILE;
	if (r == 0 && e != UNZ_END_OF_LIST_OF_FILE)
		r = error("%s: not a valid .npz (zip) file: central directory entry %zu is damaged", path, k + 1);
	unzClose(z);
	return r;
}

/* The file is read whole and handed to minizip in memory (MemZip). */
int npz_read(const char *path, TensorList *out)
{
	char *file;
	size_t flen;
	memset(out, 0, sizeof *out);
	if (read_file(path, &file, &flen) < 0)
		return -1;
	int r = npz_read_minizip(path, file, flen, out);
	if (r > 0) {
		tl_free(out);
		r = npz_read_libarchive(path, file, flen, out);
	}
	if (r == 0 && out->n == 0)
		r = error("%s: the archive holds no arrays", path);
	free(file);
	if (r < 0)
		tl_free(out);
	return r;
}

static la_ssize_t sb_writecb(struct archive *a, void *ud, const void *buf, size_t n)
{
	sb_add(ud, buf, n);
	return (la_ssize_t)n;
}

int npz_write(const char *path, const Tensor *ts, size_t n)
{
	StrBuf zip = {0};
	struct archive *a = archive_write_new();
	struct archive_entry *ent = archive_entry_new();
	int r = -1;
	if (archive_write_set_format_zip(a) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
	    archive_write_open2(a, &zip, NULL, sb_writecb, NULL, NULL) != ARCHIVE_OK) {
		error("%s: cannot start zip archive: %s", path, archive_error_string(a));
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		void *b;
		size_t len;
		char *name = ts[i].name ? xasprintf("%s.npy", ts[i].name) : xasprintf("arr_%zu.npy", i);
		if (npy_encode(&ts[i], &b, &len) < 0) {
			free(name);
			error_prefix("%s", path);
			goto out;
		}
		archive_entry_clear(ent);
		archive_entry_set_pathname(ent, name);
		archive_entry_set_filetype(ent, AE_IFREG);
		archive_entry_set_perm(ent, 0644);
		archive_entry_set_size(ent, (la_int64_t)len);
		archive_entry_set_mtime(ent, 315532800, 0); /* 1980-01-01: reproducible */
		int e = archive_write_header(a, ent);
		if (e == ARCHIVE_OK && archive_write_data(a, b, len) != (la_ssize_t)len)
			e = ARCHIVE_FATAL;
		free(b);
		if (e != ARCHIVE_OK) {
			error("%s: cannot write member '%s': %s", path, name, archive_error_string(a));
			free(name);
			goto out;
		}
		free(name);
	}
	if (archive_write_close(a) != ARCHIVE_OK) {
		error("%s: cannot finish zip archive: %s", path, archive_error_string(a));
		goto out;
	}
	r = write_file_atomic(path, zip.buf ? zip.buf : "", zip.len);
out:
	archive_entry_free(ent);
	archive_write_free(a);
	sb_release(&zip);
	return r;
}

/* ---- TensorProto .pb ---- */

static const char *container_kind_of(const void *buf, size_t len);
static int pb_write_container(const char *path, const Tensor *t, const char *name);

int tensor_load_proto(Model *m, const Onnx__TensorProto *p, Tensor *t)
{
	int64_t n = tensor_proto_numel(p);
	int ext = p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	if (n > 0 && !ext && !p->has_raw_data) {
		/* typed fields hold at least one entry per two elements: refuse
		 * dims that claim more before anything is allocated */
		uint64_t have = (uint64_t)p->n_float_data + p->n_int32_data + p->n_int64_data +
				p->n_double_data + p->n_uint64_data + p->n_string_data;
		if ((uint64_t)n > 2 * have + 16)
			return error("tensor '%s': its dims need %lld elements, it holds %llu values",
				     p->name ? p->name : "", (long long)n, (unsigned long long)have);
	}
	if (n != 0 || p->n_dims > QM_MAX_RANK)
		return tensor_from_proto(m, p, t);
	memset(t, 0, sizeof *t);
	if (tensor_alloc(t, p->has_data_type ? p->data_type : 0, (int)p->n_dims, p->dims) < 0)
		return error_prefix("tensor '%s'", p->name ? p->name : "");
	if (p->name)
		t->name = xstrdup(p->name);
	return 0;
}

int pb_parse(const void *buf, size_t len, const char *what, Tensor *t)
{
	memset(t, 0, sizeof *t);
	int deep = pb_depth_check(&onnx__tensor_proto__descriptor, buf, len);
	if (deep < 0)
		return error_prefix("%s", what);
	Onnx__TensorProto *p = deep ? NULL : onnx__tensor_proto__unpack(NULL, len, buf);
	if (!p || p->segment) {
		const char *k = container_kind_of(buf, len);
		if (p)
			onnx__tensor_proto__free_unpacked(p, NULL);
		if (k)
			return error("%s: holds %s where a tensor is expected", what, k);
		if (!p)
			return error("%s: not a serialized ONNX TensorProto", what);
		return error("%s: segmented tensors are not supported", what);
	}
	int r = -1;
	if (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
		error("%s: external data in a tensor file is not supported", what);
		goto out;
	}
	/* the data of a valid tensor file is inside the file: refuse dims that
	 * claim more before anything is allocated */
	int64_t n = tensor_proto_numel(p);
	int dt = p->has_data_type ? p->data_type : 0;
	if (n < 0 || p->n_dims > QM_MAX_RANK || (dtype_bits(dt) && p->has_raw_data && dtype_nbytes(dt, n) > len)) {
		error("%s: tensor dims claim more data than the file holds (not a TensorProto?)", what);
		goto out;
	}
	Model dummy = {0};
	if (tensor_load_proto(&dummy, p, t) < 0) {
		error_prefix("%s", what);
		goto out;
	}
	if (t->name && !*t->name) {
		free(t->name);
		t->name = NULL;
	}
	r = 0;
out:
	onnx__tensor_proto__free_unpacked(p, NULL);
	return r;
}

int pb_read(const char *path, Tensor *t)
{
	char *data;
	size_t len;
	if (read_file(path, &data, &len) < 0)
		return -1;
	int r = pb_parse(data, len, path, t);
	free(data);
	return r;
}

int pb_write(const char *path, const Tensor *t, const char *name)
{
	if (t->kind != TK_TENSOR)
		return pb_write_container(path, t, name);
	Onnx__TensorProto *p = tensor_to_proto(t, name);
	size_t n = onnx__tensor_proto__get_packed_size(p);
	uint8_t *b = xmalloc(n ? n : 1);
	onnx__tensor_proto__pack(p, b);
	int r = write_file_atomic(path, b, n);
	free(b);
	onnx__tensor_proto__free_unpacked(p, NULL);
	return r;
}

/* ---- SequenceProto / OptionalProto .pb ----
 *
 * These two messages live in ONNX's onnx-data.proto, which Debian's
 * libonnx-dev does not ship (only its C++ header), so the build cannot
 * generate them with protoc-c like onnx.proto. Their schema is declared here
 * instead, as the protobuf-c descriptors protoc-c would emit for the fields
 * we read (name, elem_type, tensor, sequence and optional values); protobuf-c
 * decodes and encodes them. Sparse and map fields are left undeclared: they
 * arrive as unknown fields, which makes a file refused by name. */

enum { PD_UNDEFINED = 0, PD_TENSOR = 1, PD_SPARSE = 2, PD_SEQUENCE = 3, PD_MAP = 4, PD_OPTIONAL = 5 };

typedef struct OptProto OptProto;
typedef struct SeqProto {
	ProtobufCMessage base;
	char *name;
	protobuf_c_boolean has_elem_type;
	int32_t elem_type;
	size_t n_tensor_values;
	Onnx__TensorProto **tensor_values;
	size_t n_sequence_values;
	struct SeqProto **sequence_values;
	size_t n_optional_values;
	OptProto **optional_values;
} SeqProto;

struct OptProto {
	ProtobufCMessage base;
	char *name;
	protobuf_c_boolean has_elem_type;
	int32_t elem_type;
	Onnx__TensorProto *tensor_value;
	SeqProto *sequence_value;
	OptProto *optional_value;
};

static const ProtobufCMessageDescriptor seq_proto_desc, opt_proto_desc;

#define PD_FIELD(nm, id, lab, ty, q, off, d) \
	{nm, id, PROTOBUF_C_LABEL_##lab, PROTOBUF_C_TYPE_##ty, q, off, d, NULL, 0, 0, NULL, NULL}

static const ProtobufCFieldDescriptor seq_proto_fields[5] = {
	PD_FIELD("name", 1, OPTIONAL, STRING, 0, offsetof(SeqProto, name), NULL),
	PD_FIELD("elem_type", 2, OPTIONAL, INT32, offsetof(SeqProto, has_elem_type),
		 offsetof(SeqProto, elem_type), NULL),
	PD_FIELD("tensor_values", 3, REPEATED, MESSAGE, offsetof(SeqProto, n_tensor_values),
		 offsetof(SeqProto, tensor_values), &onnx__tensor_proto__descriptor),
	PD_FIELD("sequence_values", 5, REPEATED, MESSAGE, offsetof(SeqProto, n_sequence_values),
		 offsetof(SeqProto, sequence_values), &seq_proto_desc),
	PD_FIELD("optional_values", 7, REPEATED, MESSAGE, offsetof(SeqProto, n_optional_values),
		 offsetof(SeqProto, optional_values), &opt_proto_desc),
};
/* both messages: fields by name elem_type, name, optional_*, sequence_*, tensor_* */
static const unsigned pd_by_name[5] = {1, 0, 4, 3, 2};
/* field numbers 1-3 are fields 0-2, 5 is 3, 7 is 4 */
static const ProtobufCIntRange pd_ranges[4] = {{1, 0}, {5, 3}, {7, 4}, {0, 5}};

static const ProtobufCFieldDescriptor opt_proto_fields[5] = {
	PD_FIELD("name", 1, OPTIONAL, STRING, 0, offsetof(OptProto, name), NULL),
	PD_FIELD("elem_type", 2, OPTIONAL, INT32, offsetof(OptProto, has_elem_type),
		 offsetof(OptProto, elem_type), NULL),
	PD_FIELD("tensor_value", 3, OPTIONAL, MESSAGE, 0, offsetof(OptProto, tensor_value),
		 &onnx__tensor_proto__descriptor),
	PD_FIELD("sequence_value", 5, OPTIONAL, MESSAGE, 0, offsetof(OptProto, sequence_value), &seq_proto_desc),
	PD_FIELD("optional_value", 7, OPTIONAL, MESSAGE, 0, offsetof(OptProto, optional_value), &opt_proto_desc),
};

static void seq_proto_init(SeqProto *p)
{
	memset(p, 0, sizeof *p);
	p->base.descriptor = &seq_proto_desc;
}

static void opt_proto_init(OptProto *p)
{
	memset(p, 0, sizeof *p);
	p->base.descriptor = &opt_proto_desc;
}

static const ProtobufCMessageDescriptor seq_proto_desc = {
	PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC, "onnx.SequenceProto", "SequenceProto", "Onnx__SequenceProto",
	"onnx", sizeof(SeqProto), 5, seq_proto_fields, pd_by_name, 3, pd_ranges,
	(ProtobufCMessageInit)seq_proto_init, NULL, NULL, NULL,
};

static const ProtobufCMessageDescriptor opt_proto_desc = {
	PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC, "onnx.OptionalProto", "OptionalProto", "Onnx__OptionalProto",
	"onnx", sizeof(OptProto), 5, opt_proto_fields, pd_by_name, 3, pd_ranges,
	(ProtobufCMessageInit)opt_proto_init, NULL, NULL, NULL,
};

static int value_from_seq(const SeqProto *p, const char *what, Tensor *t);
static int value_from_opt(const OptProto *p, const char *what, Tensor *t);

/* a tensor of a container file (checked like a tensor file's) */
static int item_from_tensor(const Onnx__TensorProto *p, const char *what, Tensor *t)
{
	memset(t, 0, sizeof *t);
	if (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
		return error("%s: external data in a tensor file is not supported", what);
	int64_t n = tensor_proto_numel(p);
	int dt = p->has_data_type ? p->data_type : 0;
	if (n < 0 || p->n_dims > QM_MAX_RANK || p->segment || p->base.n_unknown_fields ||
	    (dtype_bits(dt) && p->has_raw_data && dtype_nbytes(dt, n) > p->raw_data.len))
		return error("%s: an element is not a valid TensorProto", what);
	Model dummy = {0};
	if (tensor_load_proto(&dummy, p, t) < 0)
		return error_prefix("%s", what);
	free(t->name);
	t->name = NULL;
	return 0;
}

static int value_from_seq(const SeqProto *p, const char *what, Tensor *t)
{
	tensor_container(t, TK_SEQUENCE, 0);
	if (p->base.n_unknown_fields || (p->has_elem_type && (p->elem_type == PD_SPARSE || p->elem_type == PD_MAP)))
		return error("%s: sequences of sparse tensors or maps are not supported", what);
	size_t n = p->n_tensor_values + p->n_sequence_values + p->n_optional_values;
	if (n && n != p->n_tensor_values && n != p->n_sequence_values && n != p->n_optional_values)
		return error("%s: a sequence mixes elements of different kinds", what);
	t->items = xcalloc(n ? n : 1, sizeof *t->items);
	for (size_t i = 0; i < n; i++) {
		Tensor *e = &t->items[t->nitems];
		int r = p->n_tensor_values ? item_from_tensor(p->tensor_values[i], what, e)
			: p->n_sequence_values ? value_from_seq(p->sequence_values[i], what, e)
			: value_from_opt(p->optional_values[i], what, e);
		t->nitems++;
		if (r < 0)
			return -1;
		if (i && e->dtype && t->items[0].dtype && e->dtype != t->items[0].dtype)
			return error("%s: sequence element %zu is %s, element 0 %s", what, i,
				     dtype_name(e->dtype), dtype_name(t->items[0].dtype));
	}
	if (n)
		t->dtype = t->items[0].dtype;
	return 0;
}

static int value_from_opt(const OptProto *p, const char *what, Tensor *t)
{
	tensor_container(t, TK_OPTIONAL, 0);
	if (p->base.n_unknown_fields)
		return error("%s: optionals of sparse tensors or maps are not supported", what);
	if (!!p->tensor_value + !!p->sequence_value + !!p->optional_value > 1)
		return error("%s: an optional holds more than one value", what);
	Tensor e = {0};
	int r = 0;
	if (p->tensor_value)
		r = item_from_tensor(p->tensor_value, what, &e);
	else if (p->sequence_value)
		r = value_from_seq(p->sequence_value, what, &e);
	else if (p->optional_value)
		r = value_from_opt(p->optional_value, what, &e);
	else
		return 0; /* empty */
	if (r == 0) {
		t->items = xmalloc(sizeof *t->items);
		t->items[0] = e;
		t->nitems = 1;
		t->dtype = e.dtype;
		return 0;
	}
	tensor_free(&e);
	return -1;
}

/* what buf holds when it parses cleanly as one of the container messages */
static const char *container_kind_of(const void *buf, size_t len)
{
	static const ProtobufCMessageDescriptor *const d[2] = {&seq_proto_desc, &opt_proto_desc};
	static const char *const names[2] = {"an ONNX SequenceProto", "an ONNX OptionalProto"};
	for (int i = 0; i < 2; i++) {
		if (pb_depth_check(d[i], buf, len) != 0)
			continue;
		ProtobufCMessage *m = protobuf_c_message_unpack(d[i], NULL, len, buf);
		if (!m)
			continue;
		int clean = !m->n_unknown_fields && ((SeqProto *)m)->has_elem_type;
		protobuf_c_message_free_unpacked(m, NULL);
		if (clean)
			return names[i];
	}
	return NULL;
}

int pb_parse_kind(const void *buf, size_t len, const char *what, int kind, Tensor *t)
{
	if (kind == TK_TENSOR)
		return pb_parse(buf, len, what, t);
	memset(t, 0, sizeof *t);
	const ProtobufCMessageDescriptor *d = kind == TK_SEQUENCE ? &seq_proto_desc : &opt_proto_desc;
	int deep = pb_depth_check(d, buf, len);
	if (deep < 0)
		return error_prefix("%s", what);
	ProtobufCMessage *m = deep ? NULL : protobuf_c_message_unpack(d, NULL, len, buf);
	if (!m || m->n_unknown_fields) {
		if (m)
			protobuf_c_message_free_unpacked(m, NULL);
		return error("%s: not a serialized ONNX %s, which the model expects here", what,
			     kind == TK_SEQUENCE ? "SequenceProto" : "OptionalProto");
	}
	int r = kind == TK_SEQUENCE ? value_from_seq((SeqProto *)m, what, t) : value_from_opt((OptProto *)m, what, t);
	const char *nm = ((SeqProto *)m)->name; /* both messages start alike */
	if (r == 0 && nm && *nm)
		t->name = xstrdup(nm);
	protobuf_c_message_free_unpacked(m, NULL);
	if (r < 0)
		tensor_free(t);
	return r;
}

int pb_read_kind(const char *path, int kind, Tensor *t)
{
	char *data;
	size_t len;
	if (read_file(path, &data, &len) < 0)
		return -1;
	int r = pb_parse_kind(data, len, path, kind, t);
	free(data);
	return r;
}

static OptProto *opt_to_proto(const Tensor *t);

/* the SequenceProto of a sequence value (allocated as protobuf-c frees) */
static SeqProto *seq_to_proto(const Tensor *t)
{
	SeqProto *p = xmalloc(sizeof *p);
	seq_proto_init(p);
	p->has_elem_type = 1;
	p->elem_type = PD_TENSOR;
	size_t n = (size_t)t->nitems;
	if (n && t->items[0].kind == TK_SEQUENCE) {
		p->elem_type = PD_SEQUENCE;
		p->sequence_values = xcalloc(n, sizeof *p->sequence_values);
		for (size_t i = 0; i < n; i++)
			p->sequence_values[p->n_sequence_values++] = seq_to_proto(&t->items[i]);
	} else if (n && t->items[0].kind == TK_OPTIONAL) {
		p->elem_type = PD_OPTIONAL;
		p->optional_values = xcalloc(n, sizeof *p->optional_values);
		for (size_t i = 0; i < n; i++)
			p->optional_values[p->n_optional_values++] = opt_to_proto(&t->items[i]);
	} else if (n) {
		p->tensor_values = xcalloc(n, sizeof *p->tensor_values);
		for (size_t i = 0; i < n; i++)
			p->tensor_values[p->n_tensor_values++] = tensor_to_proto(&t->items[i], "");
	}
	return p;
}

static OptProto *opt_to_proto(const Tensor *t)
{
	OptProto *p = xmalloc(sizeof *p);
	opt_proto_init(p);
	if (!t->nitems)
		return p;
	const Tensor *e = &t->items[0];
	p->has_elem_type = 1;
	p->elem_type = e->kind == TK_SEQUENCE ? PD_SEQUENCE : e->kind == TK_OPTIONAL ? PD_OPTIONAL : PD_TENSOR;
	if (e->kind == TK_SEQUENCE)
		p->sequence_value = seq_to_proto(e);
	else if (e->kind == TK_OPTIONAL)
		p->optional_value = opt_to_proto(e);
	else
		p->tensor_value = tensor_to_proto(e, "");
	return p;
}

static int pb_write_container(const char *path, const Tensor *t, const char *name)
{
	ProtobufCMessage *m = t->kind == TK_SEQUENCE ? &seq_to_proto(t)->base : &opt_to_proto(t)->base;
	((SeqProto *)m)->name = xstrdup(name ? name : t->name ? t->name : "");
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *b = xmalloc(n ? n : 1);
	protobuf_c_message_pack(m, b);
	int r = write_file_atomic(path, b, n);
	free(b);
	protobuf_c_message_free_unpacked(m, NULL);
	return r;
}

int testset_read_kinds(const char *dir, const char *prefix, const int *kinds, size_t nkinds, TensorList *out)
{
	memset(out, 0, sizeof *out);
	for (size_t k = 0;; k++) {
		char *fn = xasprintf("%s/%s_%zu.pb", dir, prefix, k);
		struct stat st;
		if (stat(fn, &st) < 0) {
			free(fn);
			break;
		}
		Tensor t;
		int r = pb_read_kind(fn, k < nkinds ? kinds[k] : TK_TENSOR, &t);
		free(fn);
		if (r < 0) {
			tl_free(out);
			return -1;
		}
		free(t.name);
		t.name = NULL;
		tl_push(out, &t);
	}
	return 0;
}

int testset_read(const char *dir, const char *prefix, TensorList *out)
{
	return testset_read_kinds(dir, prefix, NULL, 0, out);
}

static int has_ext(const char *path, const char *ext)
{
	size_t n = strlen(path), e = strlen(ext);
	return n > e && !strcmp(path + n - e, ext);
}

int data_read_file(const char *path, TensorList *out)
{
	memset(out, 0, sizeof *out);
	Tensor t;
	if (has_ext(path, ".npz"))
		return npz_read(path, out);
	if (has_ext(path, ".npy")) {
		if (npy_read(path, &t) < 0)
			return -1;
	} else if (has_ext(path, ".pb")) {
		if (pb_read(path, &t) < 0)
			return -1;
	} else {
		return error("%s: unknown data file type (expected .npy, .npz or .pb)", path);
	}
	tl_push(out, &t);
	return 0;
}

/* ---- samples ---- */

enum { S_FILE, S_TESTSET };

typedef struct SampleSrc {
	char *path;
	int kind;
} SampleSrc;

struct SampleIter {
	SampleSrc *src;
	size_t n, cap, next;
};

const char *samples_path(const SampleIter *it, size_t i)
{
	return i < it->n ? it->src[i].path : NULL;
}

static void add_src(SampleIter *it, const char *path, int kind)
{
	if (it->n == it->cap) {
		it->cap = it->cap ? 2 * it->cap : 16;
		it->src = xreallocarray(it->src, it->cap, sizeof *it->src);
	}
	it->src[it->n].path = xstrdup(path);
	it->src[it->n].kind = kind;
	it->n++;
}

static int is_data_file(const char *name)
{
	return has_ext(name, ".npy") || has_ext(name, ".npz") || has_ext(name, ".pb");
}

static int is_testset(const char *dir)
{
	char *fn = path_join(dir, "input_0.pb");
	struct stat st;
	int r = stat(fn, &st) == 0;
	free(fn);
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_path(SampleIter *it, const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return error("cannot read data '%s':", path);
	if (!S_ISDIR(st.st_mode)) {
		if (!is_data_file(path))
			return error("%s: unknown data file type (expected .npy, .npz or .pb)", path);
		add_src(it, path, S_FILE);
		return 0;
	}
	if (is_testset(path)) {
		add_src(it, path, S_TESTSET);
		return 0;
	}
	DIR *d = opendir(path);
	if (!d)
		return error("cannot open directory '%s':", path);
	/* names with their file type from readdir after the NUL (DT_UNKNOWN
	 * and links are looked up): no stat per sample file */
	PtrVec names = {0};
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.') {
			size_t n = strlen(de->d_name);
			char *e = xmalloc(n + 2);
			memcpy(e, de->d_name, n + 1);
			e[n + 1] = (char)de->d_type;
			pv_push(&names, e);
		}
	closedir(d);
	if (names.n)
		qsort(names.v, names.n, sizeof *names.v, cmp_str);
	size_t before = it->n;
	for (size_t i = 0; i < names.n; i++) {
		const char *name = names.v[i];
		unsigned char type = (unsigned char)name[strlen(name) + 1];
		char *p = path_join(path, name);
		if (type == DT_REG) {
			if (is_data_file(p))
				add_src(it, p, S_FILE);
		} else if ((type == DT_DIR || type == DT_LNK || type == DT_UNKNOWN) && stat(p, &st) == 0) {
			if (S_ISDIR(st.st_mode) && is_testset(p))
				add_src(it, p, S_TESTSET);
			else if (S_ISREG(st.st_mode) && is_data_file(p))
				add_src(it, p, S_FILE);
		}
		free(p);
		free(names.v[i]);
	}
	pv_free(&names);
	if (it->n == before)
		return error("%s: no data files (.npy, .npz, .pb) or test_data_set directories found", path);
	return 0;
}

int samples_open(const char *const *specs, size_t nspecs, SampleIter **out)
{
	SampleIter *it = xcalloc(1, sizeof *it);
	for (size_t i = 0; i < nspecs; i++) {
		if (strpbrk(specs[i], "*?[")) {
			glob_t g;
			int e = glob(specs[i], 0, NULL, &g);
			if (e == GLOB_NOMATCH) {
				error("no data matches '%s'", specs[i]);
				goto fail;
			}
			if (e) {
				error("cannot expand '%s'", specs[i]);
				goto fail;
			}
			/* glob(3) sorts its results */
			for (size_t k = 0; k < g.gl_pathc; k++)
				if (add_path(it, g.gl_pathv[k]) < 0) {
					globfree(&g);
					goto fail;
				}
			globfree(&g);
		} else if (add_path(it, specs[i]) < 0) {
			goto fail;
		}
	}
	if (it->n == 0) {
		error("no data samples given");
		goto fail;
	}
	*out = it;
	return 0;
fail:
	samples_close(it);
	return -1;
}

size_t samples_count(const SampleIter *it)
{
	return it->n;
}

int samples_read(const SampleIter *it, size_t i, TensorList *out)
{
	memset(out, 0, sizeof *out);
	if (i >= it->n)
		return 0;
	const SampleSrc *s = &it->src[i];
	int r = s->kind == S_TESTSET ? testset_read(s->path, "input", out) : data_read_file(s->path, out);
	if (r == 0 && out->n == 0)
		r = error("%s: holds no input tensors", s->path);
	return r < 0 ? -1 : 1;
}

int samples_next(SampleIter *it, TensorList *out)
{
	int r = samples_read(it, it->next, out);
	it->next += r != 0;
	return r;
}

void samples_rewind(SampleIter *it)
{
	it->next = 0;
}

void samples_close(SampleIter *it)
{
	if (!it)
		return;
	for (size_t i = 0; i < it->n; i++)
		free(it->src[i].path);
	free(it->src);
	free(it);
}
