/* remote_action.c — quantmake's actions in a remote cache (see
 * remote_action.h). */
#include "remote_action.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reapi.pb-c.h"

/* an entry and a record are small (a record holds the key text: a line per
 * declared input file); more is not an entry of ours */
enum { MAX_ENTRY = 1 << 20, MAX_RECORD = 64 << 20 };

void remote_action_key(const char *keytext, char hex[65])
{
	sha256_buf(keytext, strlen(keytext), hex);
}

/* a name the remote gave that may become a file under an output
 * directory: relative, no empty, '.' or '..' component, no control
 * characters (the record is a text of lines) */
static int safe_name(const char *s)
{
	if (!*s || *s == '/')
		return 0;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return 0;
	for (const char *c = s;; c++) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		c += n;
		if (!*c)
			return 1;
	}
}

static int is_hex64(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++)
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return 0;
	return n == 64;
}

void remote_action_free(RemoteAction *ra)
{
	action_rec_free(&ra->rec);
	free(ra->sha);
	ra->sha = NULL;
}

/* is the record rec, from entry e, the one of this action? names each
 * output's digest in ra->sha; error() says what is wrong */
static int check_record(const char *where, const Reapi__ActionResult *e, const char *keytext, Hash key,
			const char *model, const char *stage, RemoteAction *ra)
{
	const ActionRec *rec = &ra->rec;
	if (!hash_eq(rec->key, key) || strcmp(rec->keytext, keytext) || strcmp(rec->model, model) ||
	    strcmp(rec->stage, stage))
		return error("%s: its record is another action's", where);
	char *main = xasprintf("%s.onnx", model);
	int ok = rec->nouts > 0 && !strcmp(rec->outs[0].name, main);
	free(main);
	if (!ok)
		return error("%s: its record does not start with the model %s.onnx", where, model);
	if (e->n_output_files != rec->nouts + 1)
		return error("%s: it names %zu files, its record %zu outputs", where, e->n_output_files, rec->nouts);
	ra->sha = xcalloc(rec->nouts, sizeof *ra->sha);
	for (size_t i = 0; i < rec->nouts; i++) {
		const ActionOut *o = &rec->outs[i];
		if (!safe_name(o->name))
			return error("%s: its record names an output '%s' that is not a plain relative path", where,
				     o->name);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(rec->outs[j].name, o->name))
				return error("%s: its record names output '%s' twice", where, o->name);
		const Reapi__OutputFile *f = NULL;
		for (size_t j = 0; j < e->n_output_files && !f; j++)
			if (!strcmp(e->output_files[j]->path, o->name))
				f = e->output_files[j];
		if (!f || f->digest->size_bytes != o->size)
			return error("%s: output '%s' is not in it as its record says", where, o->name);
		memcpy(ra->sha[i], f->digest->hash, 65);
	}
	for (size_t i = 0; i < rec->ndeps; i++)
		if (!*rec->deps[i].path || path_outside(rec->deps[i].path))
			return error("%s: its record names an input '%s' outside the project", where, rec->deps[i].path);
	return 0;
}

int remote_action_get(Remote *r, const char *keytext, Hash key, const char *model, const char *stage,
		      RemoteAction *out)
{
	memset(out, 0, sizeof *out);
	char ac[65];
	remote_action_key(keytext, ac);
	StrBuf buf = {0};
	int ret = remote_get_buf(r, "ac", ac, -1, MAX_ENTRY, &buf);
	if (ret != REMOTE_FOUND) {
		sb_release(&buf);
		return ret;
	}
	char *where = xasprintf("remote cache %s/ac/%s", remote_url(r), ac);
	Reapi__ActionResult *e = reapi__action_result__unpack(NULL, buf.len, (const uint8_t *)buf.buf);
	sb_release(&buf);
	const Reapi__OutputFile *recf = NULL;
	ret = REMOTE_EBAD;
	if (!e) {
		error("%s: not an ActionResult", where);
		goto out;
	}
	if (e->exit_code != 0) {
		error("%s: an action that failed (exit code %d)", where, e->exit_code);
		goto out;
	}
	for (size_t i = 0; i < e->n_output_files; i++) {
		const Reapi__OutputFile *f = e->output_files[i];
		if (!f->digest || !is_hex64(f->digest->hash) || f->digest->size_bytes < 0) {
			error("%s: file '%s' has no valid SHA-256 digest", where, f->path);
			goto out;
		}
		if (!strcmp(f->path, RECORD_PATH))
			recf = f;
	}
	if (!recf) {
		error("%s: no %s in it (not an entry of quantmake's)", where, RECORD_PATH);
		goto out;
	}
	if (recf->digest->size_bytes > MAX_RECORD) {
		error("%s: its record is %lld bytes", where, (long long)recf->digest->size_bytes);
		goto out;
	}
	ret = remote_get_buf(r, "cas", recf->digest->hash, recf->digest->size_bytes, MAX_RECORD, &buf);
	if (ret == REMOTE_MISSING) {
		/* the entry outlived its record blob (evicted): a miss */
		sb_release(&buf);
		goto out;
	}
	if (ret != REMOTE_FOUND) {
		sb_release(&buf);
		goto out;
	}
	ret = REMOTE_EBAD;
	if (buf.len == 0 || action_rec_parse(buf.buf, &out->rec) < 0)
		error("%s: its record does not parse", where);
	else if (check_record(where, e, keytext, key, model, stage, out) == 0)
		ret = REMOTE_FOUND;
	sb_release(&buf);
out:
	if (ret != REMOTE_FOUND)
		remote_action_free(out);
	if (e)
		reapi__action_result__free_unpacked(e, NULL);
	free(where);
	return ret;
}

int remote_action_fetch(Remote *r, Cache *c, const RemoteAction *ra, const char *tmpdir)
{
	for (size_t i = 0; i < ra->rec.nouts; i++) {
		const ActionOut *o = &ra->rec.outs[i];
		char *obj = cache_object_path(c, o->h);
		int have = access(obj, F_OK) == 0;
		free(obj);
		if (have)
			continue;
		char *tmp = xasprintf("%s/remote.%ld", tmpdir, (long)getpid());
		Hash h;
		int ret = remote_get_file(r, ra->sha[i], o->size, tmp, &h);
		if (ret == REMOTE_FOUND && !hash_eq(h, o->h)) {
			char hex[HASH_HEX_LEN];
			unlink(tmp);
			error("remote cache %s/cas/%s: output '%s' is not the bytes its record names (XXH3 %s)",
			      remote_url(r), ra->sha[i], o->name, hash_hex(o->h, hex));
			ret = REMOTE_EBAD;
		}
		if (ret == REMOTE_FOUND && cache_put_known(c, tmp, h) < 0)
			ret = REMOTE_EFAIL;
		free(tmp);
		if (ret == REMOTE_MISSING)
			ret = error("remote cache %s/cas/%s: output '%s' of the entry is gone", remote_url(r),
				    ra->sha[i], o->name);
		if (ret != REMOTE_FOUND)
			return ret;
	}
	return REMOTE_FOUND;
}

/* PUT a blob from a file unless the remote has it */
static int put_blob(Remote *r, const char *hex, const char *path, int64_t size)
{
	int ret = remote_head(r, "cas", hex);
	if (ret == REMOTE_MISSING)
		ret = remote_put_file(r, "cas", hex, path, size);
	return ret;
}

int remote_action_put(Remote *r, Cache *c, const ActionRec *rec)
{
	size_t n = rec->nouts;
	Reapi__Digest *dig = xcalloc(n + 1, sizeof *dig);
	Reapi__OutputFile *files = xcalloc(n + 1, sizeof *files);
	Reapi__OutputFile **fp = xcalloc(n + 1, sizeof *fp);
	char (*sha)[65] = xcalloc(n + 1, sizeof *sha);
	int ret = REMOTE_FOUND;
	for (size_t i = 0; i < n && ret == REMOTE_FOUND; i++) {
		char *obj = cache_object_path(c, rec->outs[i].h);
		int64_t size;
		if (sha256_file(obj, sha[i], &size) < 0)
			ret = REMOTE_EFAIL;
		else if (size != rec->outs[i].size)
			ret = error("cache object '%s' is not %lld bytes as its record says", obj,
				    (long long)rec->outs[i].size);
		else
			ret = put_blob(r, sha[i], obj, size);
		free(obj);
		reapi__digest__init(&dig[i]);
		dig[i].hash = sha[i];
		dig[i].size_bytes = rec->outs[i].size;
		reapi__output_file__init(&files[i]);
		files[i].path = rec->outs[i].name;
		files[i].digest = &dig[i];
		fp[i] = &files[i];
	}
	StrBuf text = {0};
	uint8_t *entry = NULL;
	for (size_t i = 0; i < n && ret == REMOTE_FOUND; i++)
		if (!strcmp(rec->outs[i].name, RECORD_PATH))
			ret = error("an output named %s cannot go to a remote cache", RECORD_PATH);
	if (ret == REMOTE_FOUND) {
		/* the record is this action's alone: sent without asking */
		action_rec_text(rec, &text);
		sha256_buf(text.buf, text.len, sha[n]);
		ret = remote_put_buf(r, "cas", sha[n], text.buf, text.len);
	}
	if (ret == REMOTE_FOUND) {
		reapi__digest__init(&dig[n]);
		dig[n].hash = sha[n];
		dig[n].size_bytes = (int64_t)text.len;
		reapi__output_file__init(&files[n]);
		files[n].path = RECORD_PATH;
		files[n].digest = &dig[n];
		fp[n] = &files[n];
		Reapi__ActionResult ar = REAPI__ACTION_RESULT__INIT;
		ar.n_output_files = n + 1;
		ar.output_files = fp;
		entry = xmalloc(reapi__action_result__get_packed_size(&ar) + 1);
		size_t len = reapi__action_result__pack(&ar, entry);
		char ac[65];
		remote_action_key(rec->keytext, ac);
		ret = remote_put_buf(r, "ac", ac, entry, len);
	}
	sb_release(&text);
	free(entry);
	free(dig);
	free(files);
	free(fp);
	free(sha);
	return ret;
}
