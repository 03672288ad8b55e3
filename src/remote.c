/* remote.c — the remote cache client over libcurl (see remote.h). */
#include "remote.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

struct Remote {
	char *url;              /* without a trailing '/' */
	int read_only;
	char *header;
	long timeout;
	CURL *curl;             /* made by the process that asks first */
	pid_t owner;            /* that process */
	struct curl_slist *hdrs;
	RemoteStats st;
	char errbuf[CURL_ERROR_SIZE];
};

/* bytes a transfer moves through libcurl's buffers at a time: its
 * default (16 KiB) called the write function 64 times per MiB */
enum { XFER_BUF = 256 * 1024 };

static void to_hex(const uint8_t *b, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[b[i] >> 4];
		out[2 * i + 1] = hx[b[i] & 15];
	}
	out[2 * n] = 0;
}

void sha256_buf(const void *p, size_t n, char hex[65])
{
	struct sha256_ctx c;
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_init(&c);
	sha256_update(&c, n, p);
	sha256_digest(&c, sizeof d, d);
	to_hex(d, sizeof d, hex);
}

typedef struct Sha {
	struct sha256_ctx c;
	int64_t n;
} Sha;

static void sha_update(void *ud, const void *p, size_t n)
{
	Sha *s = ud;
	sha256_update(&s->c, n, p);
	s->n += (int64_t)n;
}

int sha256_file(const char *path, char hex[65], int64_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return error("cannot open '%s':", path);
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	Sha s = {.n = 0};
	sha256_init(&s.c);
	enum { BUFSZ = 1 << 16 };
	void *buf = xmalloc(BUFSZ);
	int r = read_blocks(fd, path, -1, buf, BUFSZ, sha_update, &s);
	close(fd);
	free(buf);
	uint8_t d[SHA256_DIGEST_SIZE];
	sha256_digest(&s.c, sizeof d, d);
	if (r == 0) {
		to_hex(d, sizeof d, hex);
		*size = s.n;
	}
	return r;
}

int remote_url_check(const char *url, int allow_credentials)
{
	CURLU *u = curl_url();
	if (!u)
		return error("out of memory");
	char *scheme = NULL, *host = NULL, *part = NULL;
	int r = 0;
	CURLUcode c = curl_url_set(u, CURLUPART_URL, url, 0);
	if (c != CURLUE_OK) {
		r = error("'%s' is not a URL (%s): expected http://HOST[:PORT][/PATH] or https://...", url,
			  curl_url_strerror(c));
		goto out;
	}
	curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
	if (!scheme || (strcmp(scheme, "http") && strcmp(scheme, "https"))) {
		r = error("'%s': the remote cache speaks http or https, not %s", url, scheme ? scheme : "(none)");
		goto out;
	}
	if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host || !*host) {
		r = error("'%s' names no host", url);
		goto out;
	}
	if (curl_url_get(u, CURLUPART_QUERY, &part, 0) == CURLUE_OK && part) {
		r = error("'%s': a query (?...) has no place in a remote cache URL", url);
		goto out;
	}
	curl_free(part);
	part = NULL;
	if (curl_url_get(u, CURLUPART_FRAGMENT, &part, 0) == CURLUE_OK && part) {
		r = error("'%s': a fragment (#...) has no place in a remote cache URL", url);
		goto out;
	}
	curl_free(part);
	part = NULL;
	if (!allow_credentials && ((curl_url_get(u, CURLUPART_USER, &part, 0) == CURLUE_OK && part) ||
				   (curl_url_get(u, CURLUPART_PASSWORD, &part, 0) == CURLUE_OK && part)))
		r = error("the remote cache URL holds credentials: a rule file is no place for secrets; "
			  "name an environment variable with remote-cache.auth-env instead");
out:
	curl_free(part);
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(u);
	return r;
}

int remote_header_check(const char *h)
{
	size_t n = 0;
	/* a token, as RFC 9110 allows in a field name */
	while (h[n] && (h[n] == '-' || h[n] == '_' || (h[n] >= '0' && h[n] <= '9') || (h[n] >= 'a' && h[n] <= 'z') ||
			(h[n] >= 'A' && h[n] <= 'Z')))
		n++;
	if (n == 0 || h[n] != ':' || !h[n + 1])
		return error("it does not hold an HTTP header 'Name: value' (such as 'Authorization: Bearer TOKEN')");
	for (const char *p = h; *p; p++)
		if (*p == '\r' || *p == '\n')
			return error("it holds more than one line: one header 'Name: value' expected");
	return 0;
}

Remote *remote_new(const RemoteOpts *o)
{
	Remote *r = xcalloc(1, sizeof *r);
	r->url = xstrdup(o->url);
	size_t n = strlen(r->url);
	while (n > 0 && r->url[n - 1] == '/')
		r->url[--n] = 0;
	r->read_only = o->read_only;
	r->header = o->header ? xstrdup(o->header) : NULL;
	r->timeout = o->timeout > 0 ? o->timeout : 10;
	return r;
}

void remote_free(Remote *r)
{
	if (!r)
		return;
	/* a handle another process made (this one was forked after) is left
	 * alone: cleaning it up could close that process's TLS session */
	if (r->curl && r->owner == getpid()) {
		curl_easy_cleanup(r->curl);
		curl_slist_free_all(r->hdrs);
	}
	free(r->url);
	free(r->header);
	free(r);
}

const char *remote_url(const Remote *r)
{
	return r->url;
}

int remote_read_only(const Remote *r)
{
	return r->read_only;
}

const RemoteStats *remote_stats(const Remote *r)
{
	return &r->st;
}

static CURL *handle(Remote *r)
{
	if (r->curl && r->owner == getpid())
		return r->curl;
	/* a forked child: the parent's handle and headers stay the parent's */
	r->curl = NULL;
	r->hdrs = NULL;
	static pid_t inited;
	if (inited != getpid()) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return error("cannot initialize libcurl"), NULL;
		inited = getpid();
	}
	r->curl = curl_easy_init();
	if (!r->curl)
		return error("cannot initialize libcurl"), NULL;
	r->owner = getpid();
	/* no "Expect: 100-continue": a round trip before every upload */
	r->hdrs = curl_slist_append(NULL, "Expect:");
	if (r->header)
		r->hdrs = curl_slist_append(r->hdrs, r->header);
	return r->curl;
}

/* one transfer's state, handed to libcurl's callbacks */
typedef struct Xfer {
	Remote *r;
	/* download */
	int status;             /* the response's status, once known */
	int fd;                 /* into a file, or */
	StrBuf *buf;            /* into memory */
	size_t max;             /* refuse more than this many bytes */
	int64_t got;
	int too_big, write_failed;
	int discard;            /* a reply's body is read and dropped */
	struct sha256_ctx sha;
	XXH3_state_t *xxh;
	/* upload */
	const char *src;        /* from memory, or */
	int src_fd;             /* from a file */
	int64_t left;
	int read_failed;
	const char *src0;       /* where it starts, and its size: libcurl */
	int64_t size;           /* sends it again on a new connection when the
				   server closed the one it reused */
} Xfer;

static size_t on_write(char *p, size_t sz, size_t nm, void *ud)
{
	Xfer *x = ud;
	size_t n = sz * nm;
	if (!x->status) {
		long code = 0;
		curl_easy_getinfo(x->r->curl, CURLINFO_RESPONSE_CODE, &code);
		x->status = (int)code;
	}
	if (x->status != 200 || x->discard)
		return n; /* an error page, or a PUT's reply: not kept */
	if ((uint64_t)x->got + n > x->max) {
		x->too_big = 1;
		return 0;
	}
	sha256_update(&x->sha, n, (const uint8_t *)p);
	if (x->xxh)
		XXH3_128bits_update(x->xxh, p, n);
	if (x->buf) {
		sb_add(x->buf, p, n);
	} else {
		size_t off = 0;
		while (off < n) {
			ssize_t w = write(x->fd, p + off, n - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				x->write_failed = errno;
				return 0;
			}
			off += (size_t)w;
		}
	}
	x->got += (int64_t)n;
	return n;
}

static size_t on_read(char *p, size_t sz, size_t nm, void *ud)
{
	Xfer *x = ud;
	size_t n = sz * nm;
	if ((int64_t)n > x->left)
		n = (size_t)x->left;
	if (n == 0)
		return 0;
	if (x->src) {
		memcpy(p, x->src, n);
		x->src += n;
	} else {
		ssize_t got;
		while ((got = read(x->src_fd, p, n)) < 0 && errno == EINTR)
			;
		if (got <= 0) {
			/* the file is shorter than it was: never send less than
			 * Content-Length promised as if it were all */
			x->read_failed = 1;
			return CURL_READFUNC_ABORT;
		}
		n = (size_t)got;
	}
	x->left -= (int64_t)n;
	return n;
}

static int on_seek(void *ud, curl_off_t off, int origin)
{
	Xfer *x = ud;
	if (origin != SEEK_SET || off < 0 || off > x->size)
		return CURL_SEEKFUNC_CANTSEEK;
	if (x->src0) {
		x->src = x->src0 + off;
	} else if (lseek(x->src_fd, (off_t)off, SEEK_SET) < 0) {
		return CURL_SEEKFUNC_FAIL;
	}
	x->left = x->size - off;
	return CURL_SEEKFUNC_OK;
}

/* run one request; FOUND (2xx), MISSING (404) or an error */
static int perform(Remote *r, const char *method, const char *kind, const char *hex, Xfer *x)
{
	CURL *c = handle(r);
	if (!c)
		return REMOTE_EFAIL;
	char *url = xasprintf("%s/%s/%s", r->url, kind, hex);
	/* reset keeps the open connection and the DNS cache */
	curl_easy_reset(c);
	r->errbuf[0] = 0;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, r->hdrs);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "quantmake/" QM_VERSION);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, r->timeout);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, r->timeout);
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, (long)XFER_BUF);
	curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, (long)XFER_BUF);
	if (!strcmp(method, "HEAD")) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(method, "PUT")) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, x);
		curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(c, CURLOPT_SEEKDATA, x);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->left);
		/* a reply's body (nginx's 201 page) is read and dropped */
		x->discard = 1;
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	} else {
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	}
	CURLcode cc = curl_easy_perform(c);
	long code = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	int ret;
	if (x->too_big) {
		error("remote cache %s: %s answered more bytes than expected: discarded", url, method);
		ret = REMOTE_EBAD;
	} else if (x->write_failed) {
		errno = x->write_failed;
		ret = error("remote cache %s: cannot write what it answered:", url);
	} else if (x->read_failed) {
		ret = error("remote cache %s: a file to upload changed while it was sent", url);
	} else if (cc != CURLE_OK) {
		const char *why = r->errbuf[0] ? r->errbuf : curl_easy_strerror(cc);
		int down = cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
			   cc == CURLE_COULDNT_RESOLVE_PROXY || cc == CURLE_OPERATION_TIMEDOUT ||
			   cc == CURLE_GOT_NOTHING || cc == CURLE_SEND_ERROR || cc == CURLE_RECV_ERROR;
		error("remote cache %s: %s failed: %s", url, method, why);
		ret = down ? REMOTE_EDOWN : REMOTE_EFAIL;
	} else if (code == 404) {
		ret = REMOTE_MISSING;
	} else if (code == 200 || (!strcmp(method, "PUT") && (code == 201 || code == 204))) {
		ret = REMOTE_FOUND;
	} else {
		ret = error("remote cache %s: %s answered HTTP %ld", url, method, code);
	}
	free(url);
	return ret;
}

static void xfer_init(Xfer *x, Remote *r)
{
	memset(x, 0, sizeof *x);
	x->r = r;
	x->fd = x->src_fd = -1;
	sha256_init(&x->sha);
}

/* after a GET that found the blob: is it size bytes of SHA-256 hex? */
static int check_blob(Remote *r, Xfer *x, const char *kind, const char *hex, int64_t size)
{
	uint8_t d[SHA256_DIGEST_SIZE];
	char got[65];
	sha256_digest(&x->sha, sizeof d, d);
	to_hex(d, sizeof d, got);
	if (size >= 0 && x->got != size) {
		error("remote cache %s/%s/%s: %lld bytes received, %lld expected: discarded", r->url, kind, hex,
		      (long long)x->got, (long long)size);
		return REMOTE_EBAD;
	}
	if (strcmp(got, hex)) {
		error("remote cache %s/%s/%s: the bytes received hash to %s: discarded", r->url, kind, hex, got);
		return REMOTE_EBAD;
	}
	r->st.bytes_down += x->got;
	r->st.blobs_down++;
	return REMOTE_FOUND;
}

int remote_get_buf(Remote *r, const char *kind, const char *hex, int64_t size, size_t max, StrBuf *out)
{
	Xfer x;
	xfer_init(&x, r);
	sb_reset(out);
	x.buf = out;
	x.max = size >= 0 && (uint64_t)size < max ? (size_t)size : max;
	int ret = perform(r, "GET", kind, hex, &x);
	if (ret == REMOTE_FOUND && size >= 0)
		ret = check_blob(r, &x, kind, hex, size);
	else if (ret == REMOTE_FOUND)
		r->st.bytes_down += x.got;
	if (ret != REMOTE_FOUND)
		sb_reset(out);
	return ret;
}

int remote_get_file(Remote *r, const char *hex, int64_t size, const char *dst, Hash *xxh)
{
	Xfer x;
	xfer_init(&x, r);
	x.fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (x.fd < 0)
		return error("cannot create '%s':", dst);
	x.max = (size_t)size;
	x.xxh = XXH3_createState();
	XXH3_128bits_reset(x.xxh);
	int ret = perform(r, "GET", "cas", hex, &x);
	if (close(x.fd) < 0 && ret == REMOTE_FOUND)
		ret = error("cannot write '%s':", dst);
	if (ret == REMOTE_FOUND)
		ret = check_blob(r, &x, "cas", hex, size);
	if (ret == REMOTE_FOUND) {
		XXH128_canonical_t cn;
		XXH128_canonicalFromHash(&cn, XXH3_128bits_digest(x.xxh));
		memcpy(xxh->b, cn.digest, sizeof xxh->b);
	} else {
		unlink(dst);
	}
	XXH3_freeState(x.xxh);
	return ret;
}

int remote_head(Remote *r, const char *kind, const char *hex)
{
	Xfer x;
	xfer_init(&x, r);
	return perform(r, "HEAD", kind, hex, &x);
}

static int put(Remote *r, const char *kind, const char *hex, Xfer *x)
{
	if (r->read_only)
		return error("remote cache %s is read-only here", r->url);
	int64_t n = x->left;
	int ret = perform(r, "PUT", kind, hex, x);
	if (ret == REMOTE_MISSING)
		ret = error("remote cache %s/%s/%s: PUT answered HTTP 404", r->url, kind, hex);
	if (ret == REMOTE_FOUND) {
		r->st.bytes_up += n;
		r->st.blobs_up++;
	}
	return ret;
}

int remote_put_buf(Remote *r, const char *kind, const char *hex, const void *p, size_t n)
{
	Xfer x;
	xfer_init(&x, r);
	x.src = x.src0 = p;
	x.left = x.size = (int64_t)n;
	return put(r, kind, hex, &x);
}

int remote_put_file(Remote *r, const char *kind, const char *hex, const char *path, int64_t size)
{
	Xfer x;
	xfer_init(&x, r);
	x.src_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (x.src_fd < 0)
		return error("cannot open '%s':", path);
	posix_fadvise(x.src_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	x.left = x.size = size;
	int ret = put(r, kind, hex, &x);
	close(x.src_fd);
	return ret;
}
