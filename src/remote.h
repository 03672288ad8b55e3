/* remote.h — the remote cache client: the Bazel HTTP remote cache protocol
 * over libcurl, as bazel-remote, nginx with WebDAV PUT and BuildBuddy serve
 * it:
 *
 *   GET, HEAD, PUT {URL}/cas/{sha256}   blobs, named by the lower-case hex
 *                                        SHA-256 of their bytes
 *   GET, PUT       {URL}/ac/{sha256}    action entries (REAPI ActionResult,
 *                                        see remote_action.h)
 *
 * 200 is found (PUT: 200, 201 or 204 stored), 404 is not found; anything
 * else is the server's failure. A blob is downloaded into a file while its
 * SHA-256 (and the XXH3-128 the local store names it by) is computed, and
 * its size and SHA-256 are checked before the call returns, so a caller
 * moves into the local cache only bytes that are what their name says.
 *
 * One libcurl handle per process, made at its first request (a forked
 * child makes its own), keeps the connection open for the next request.
 * TLS is libcurl's default: the peer and its host name are verified
 * against the system's certificates. Redirects are not followed.
 *
 * Library code: errors are returned with error() (naming the URL and what
 * went wrong), never printed. */
#ifndef QM_REMOTE_H
#define QM_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "util.h"

typedef struct RemoteOpts {
	const char *url;      /* base URL: http or https, host, optional path */
	int read_only;        /* never upload */
	const char *header;   /* an extra request header "Name: value" (the
				 credentials), or NULL */
	long timeout;         /* seconds to connect, and that a transfer may
				 stall before it is given up */
} RemoteOpts;

/* Results of the calls below. A call that fails sets error(). */
enum {
	REMOTE_FOUND = 1,
	REMOTE_MISSING = 0,   /* 404 */
	REMOTE_EFAIL = -1,    /* an HTTP error, a transfer cut short, a local
				 file that cannot be read or written */
	REMOTE_EBAD = -2,     /* the bytes received are not what they should
				 be (SHA-256 or size): discarded */
	REMOTE_EDOWN = -3,    /* no answer: cannot resolve or connect, timed
				 out, connection closed without a reply */
};

typedef struct RemoteStats {
	int64_t bytes_down, bytes_up;
	long blobs_down, blobs_up;
} RemoteStats;

typedef struct Remote Remote;

/* 0 when url can be a remote cache's base URL (http or https, a host, no
 * query or fragment; user name and password only if allow_credentials),
 * else -1 with error() saying what is wrong */
int remote_url_check(const char *url, int allow_credentials);
/* 0 when header is one line "Name: value" (what the auth variable must
 * hold), else -1 with error() (never quoting the value: it is a secret) */
int remote_header_check(const char *header);

/* a client for o (copied); no I/O yet */
Remote *remote_new(const RemoteOpts *o);
void remote_free(Remote *r);
const char *remote_url(const Remote *r);
int remote_read_only(const Remote *r);
const RemoteStats *remote_stats(const Remote *r);

/* GET {URL}/{kind}/{hex} into out (replacing it), at most max bytes. With
 * size >= 0 (a blob) the body must have that size and SHA-256 hex. */
int remote_get_buf(Remote *r, const char *kind, const char *hex, int64_t size, size_t max, StrBuf *out);
/* GET {URL}/cas/{hex} into the new file dst, which must hold size bytes of
 * that SHA-256; *xxh gets their XXH3-128. dst is removed unless FOUND. */
int remote_get_file(Remote *r, const char *hex, int64_t size, const char *dst, Hash *xxh);
/* HEAD {URL}/{kind}/{hex} */
int remote_head(Remote *r, const char *kind, const char *hex);
/* PUT n bytes at p, or the file path (size bytes), to {URL}/{kind}/{hex};
 * FOUND when stored */
int remote_put_buf(Remote *r, const char *kind, const char *hex, const void *p, size_t n);
int remote_put_file(Remote *r, const char *kind, const char *hex, const char *path, int64_t size);

/* lower-case hex SHA-256 of a buffer, and of a file (with its size);
 * sha256_file: 0 or -1 with error() */
void sha256_buf(const void *p, size_t n, char hex[65]);
int sha256_file(const char *path, char hex[65], int64_t *size);

#endif
