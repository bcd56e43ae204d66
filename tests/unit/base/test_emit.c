/* Unit tests for base/emit.c: one tree, four formats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "emit.h"
#include "error.h"

static struct gm_val *sample(void)
{
	struct gm_val *root = gm_val_obj(), *per = gm_val_obj();
	struct gm_val *stages = gm_val_arr();

	gm_obj_set_str(root, "name", "llama \"7b\"");
	gm_obj_set_uint(root, "gpu_capacity_bytes", 3 * (1ULL << 29));
	gm_obj_set_bool(root, "fits", true);
	gm_obj_set(root, "unknown", gm_val_null());
	gm_obj_set_uint(per, "weights_bytes", 1ULL << 30);
	gm_obj_set_uint(per, "workspace_bytes", 8 << 20);
	gm_obj_set_real(per, "ratio", 0.5);
	gm_obj_set(root, "per_gpu", per);
	for (int i = 0; i < 2; i++) {
		struct gm_val *s = gm_val_obj();
		gm_obj_set_int(s, "stage", i);
		gm_obj_set_uint(s, "peak_bytes", (uint64_t)(i + 1) << 30);
		gm_arr_push(stages, s);
	}
	gm_obj_set(root, "stages", stages);
	return root;
}

static char *render(const struct gm_val *v, enum gm_format f)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	assert_int_equal(gm_emit(out, v, f), 0);
	fclose(out);
	return buf;
}

static void json(void **state)
{
	struct gm_val *v = sample();
	char *s = render(v, GM_FORMAT_JSON);

	(void)state;
	assert_string_equal(s, "{\n"
			       "  \"name\": \"llama \\\"7b\\\"\",\n"
			       "  \"gpu_capacity_bytes\": 1610612736,\n"
			       "  \"fits\": true,\n"
			       "  \"unknown\": null,\n"
			       "  \"per_gpu\": {\n"
			       "    \"weights_bytes\": 1073741824,\n"
			       "    \"workspace_bytes\": 8388608,\n"
			       "    \"ratio\": 0.5\n"
			       "  },\n"
			       "  \"stages\": [\n"
			       "    {\n"
			       "      \"stage\": 0,\n"
			       "      \"peak_bytes\": 1073741824\n"
			       "    },\n"
			       "    {\n"
			       "      \"stage\": 1,\n"
			       "      \"peak_bytes\": 2147483648\n"
			       "    }\n"
			       "  ]\n"
			       "}\n");
	free(s);
	gm_val_free(v);
}

static void yaml(void **state)
{
	struct gm_val *v = sample();
	char *s = render(v, GM_FORMAT_YAML);

	(void)state;
	assert_string_equal(s, "name: \"llama \\\"7b\\\"\"\n"
			       "gpu_capacity_bytes: 1610612736\n"
			       "fits: true\n"
			       "unknown: null\n"
			       "per_gpu:\n"
			       "  weights_bytes: 1073741824\n"
			       "  workspace_bytes: 8388608\n"
			       "  ratio: 0.5\n"
			       "stages:\n"
			       "  -\n"
			       "    stage: 0\n"
			       "    peak_bytes: 1073741824\n"
			       "  -\n"
			       "    stage: 1\n"
			       "    peak_bytes: 2147483648\n");
	free(s);
	gm_val_free(v);
}

static void csv(void **state)
{
	struct gm_val *v = sample();
	char *s = render(v, GM_FORMAT_CSV);

	(void)state;
	assert_string_equal(
		s, "name,gpu_capacity_bytes,fits,unknown,per_gpu.weights_bytes,"
		   "per_gpu.workspace_bytes,per_gpu.ratio,stages.0.stage,stages.0.peak_bytes,"
		   "stages.1.stage,stages.1.peak_bytes\n"
		   "\"llama \"\"7b\"\"\",1610612736,true,,1073741824,8388608,0.5,0,"
		   "1073741824,1,2147483648\n");
	free(s);
	s = render(gm_obj_get(v, "stages"), GM_FORMAT_CSV);
	assert_string_equal(s, "stage,peak_bytes\n0,1073741824\n1,2147483648\n");
	free(s);
	gm_val_free(v);
}

/* Unit suffixes in table headings: bandwidth_gbps holds GB/s (10^9
 * bytes a second), not gigabits; the key stays in JSON. */
static void table_units(void **state)
{
	struct gm_val *arr = gm_val_arr(), *r = gm_val_obj();
	char *s;

	(void)state;
	gm_obj_set_real(r, "bandwidth_gbps", 3350);
	gm_obj_set_real(r, "bf16_tflops", 989);
	gm_arr_push(arr, r);
	s = render(arr, GM_FORMAT_TABLE);
	assert_non_null(strstr(s, "bandwidth GB/s"));
	assert_non_null(strstr(s, "bf16 TFLOP/s"));
	assert_null(strstr(s, "gbps"));
	free(s);
	s = render(arr, GM_FORMAT_JSON);
	assert_non_null(strstr(s, "\"bandwidth_gbps\": 3350"));
	free(s);
	gm_val_free(arr);
}

static void table(void **state)
{
	struct gm_val *v = sample();
	char *s = render(v, GM_FORMAT_TABLE);

	(void)state;
	assert_string_equal(s, "name          llama \"7b\"\n"
			       "gpu capacity  1.50 GiB\n"
			       "fits          yes\n"
			       "unknown       -\n"
			       "\n"
			       "per gpu:\n"
			       "  weights    1.00 GiB\n"
			       "  workspace  0.01 GiB\n"
			       "  ratio      0.5\n"
			       "\n"
			       "stages:\n"
			       "  stage  peak    \n"
			       "      0  1.00 GiB\n"
			       "      1  2.00 GiB\n");
	free(s);
	gm_val_free(v);
}

static void inspection(void **state)
{
	struct gm_val *v = sample();

	(void)state;
	assert_int_equal(gm_val_kind(v), GM_VAL_OBJ);
	assert_true(gm_val_as_uint(gm_obj_get(gm_obj_get(v, "per_gpu"),
					      "weights_bytes")) == 1ULL << 30);
	assert_string_equal(gm_val_as_str(gm_obj_get(v, "name")), "llama \"7b\"");
	assert_int_equal(gm_val_len(gm_obj_get(v, "stages")), 2);
	assert_null(gm_obj_get(v, "missing"));
	gm_obj_set_uint(v, "fits", 3); /* replaces */
	assert_int_equal(gm_val_len(v), 6);
	gm_val_free(v);
}

static void format_names(void **state)
{
	enum gm_format f;
	struct gm_diag d;

	(void)state;
	assert_int_equal(gm_format_parse("JSON", &f, &d), 0);
	assert_int_equal(f, GM_FORMAT_JSON);
	assert_int_equal(gm_format_parse("xml", &f, &d), GM_EINVAL);
	assert_non_null(strstr(d.msg, "--format"));
}

static void atomic_file(void **state)
{
	char dir[] = "/tmp/gm-emit-XXXXXX", path[256], buf[16] = {0};
	struct gm_file f;
	struct gm_diag d;
	FILE *in;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/out.json", dir);
	assert_int_equal(gm_file_begin(&f, path, &d), 0);
	fputs("half", f.fp);
	assert_int_equal(gm_file_end(&f, false, &d), 0);
	assert_int_not_equal(access(path, F_OK), 0); /* nothing written */
	assert_int_equal(gm_file_begin(&f, path, &d), 0);
	fputs("whole", f.fp);
	assert_int_equal(gm_file_end(&f, true, &d), 0);
	in = fopen(path, "r");
	assert_non_null(in);
	assert_non_null(fgets(buf, sizeof(buf), in));
	fclose(in);
	assert_string_equal(buf, "whole");
	unlink(path);
	rmdir(dir);
	assert_int_equal(gm_file_begin(&f, "/nonexistent-dir/x", &d), GM_EIO);
}

static int write_whole(const char *path)
{
	struct gm_file f;
	struct gm_diag d;

	if (gm_file_begin(&f, path, &d))
		return -1;
	fputs("whole", f.fp);
	return gm_file_end(&f, true, &d);
}

/* New files honour the umask; replaced files keep their mode. */
static void atomic_file_mode(void **state)
{
	char dir[] = "/tmp/gm-emit-XXXXXX", path[256];
	struct stat st;
	mode_t old = umask(022);

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/new", dir);
	assert_int_equal(write_whole(path), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(write_whole(path), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0640);
	umask(old);
	unlink(path);
	rmdir(dir);
}

/* A symlink's target is replaced, the link kept; a FIFO is written
 * directly (not replaced); a directory is refused. */
static void atomic_file_special(void **state)
{
	char dir[] = "/tmp/gm-emit-XXXXXX", target[256], link[256],
	     fifo[256], node[256], buf[16] = {0};
	struct gm_diag d;
	struct gm_file f;
	struct stat st;
	FILE *in;
	int rfd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(target, sizeof(target), "%s/target", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	in = fopen(target, "w");
	assert_non_null(in);
	fclose(in);
	assert_int_equal(symlink("target", link), 0);
	assert_int_equal(write_whole(link), 0);
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	in = fopen(target, "r");
	assert_non_null(in);
	assert_non_null(fgets(buf, sizeof(buf), in));
	fclose(in);
	assert_string_equal(buf, "whole");

	assert_int_equal(mkfifo(fifo, 0600), 0);
	rfd = open(fifo, O_RDONLY | O_NONBLOCK);
	assert_true(rfd >= 0);
	assert_int_equal(write_whole(fifo), 0);
	assert_int_equal(lstat(fifo, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	memset(buf, 0, sizeof(buf));
	assert_int_equal(read(rfd, buf, sizeof(buf) - 1), 5);
	close(rfd);

	/* A character device of our own (not /dev/null, which a regression
	 * would replace); mknod needs root, so only then. */
	snprintf(node, sizeof(node), "%s/null", dir);
	if (mknod(node, S_IFCHR | 0666, makedev(1, 3)) == 0) {
		assert_int_equal(write_whole(node), 0);
		assert_int_equal(lstat(node, &st), 0);
		assert_true(S_ISCHR(st.st_mode));
		unlink(node);
	}
	assert_int_equal(gm_file_begin(&f, dir, &d), GM_EIO);
	assert_non_null(strstr(d.msg, "directory"));

	unlink(fifo);
	unlink(link);
	unlink(target);
	rmdir(dir);
}

static void put(const char *path, const char *text)
{
	FILE *out = fopen(path, "w");

	assert_non_null(out);
	fputs(text, out);
	fclose(out);
}

static void expect_text(const char *path, const char *text)
{
	char buf[64] = {0};
	FILE *in = fopen(path, "r");

	assert_non_null(in);
	assert_non_null(fgets(buf, sizeof(buf), in));
	fclose(in);
	assert_string_equal(buf, text);
}

/*
 * In a sticky world-writable directory (as /tmp), links and files of
 * another user are neither followed nor replaced, also by root: a link
 * onto a root-only file, a dangling link, another user's file. Our own
 * link there still works. The other user is made with lchown/chown,
 * which needs root (as in CI); without it only our own link is tested.
 */
static void atomic_file_shared_dir(void **state)
{
	char top[] = "/tmp/gm-emit-XXXXXX", shared[64], priv[64],
	     secret[256], link[256], dangle[256], created[256], theirs[256],
	     mine[256], mylink[256];
	struct gm_diag d;
	struct gm_file f;
	struct stat st;
	const uid_t other = 4242;

	(void)state;
	assert_non_null(mkdtemp(top));
	snprintf(shared, sizeof(shared), "%s/shared", top);
	snprintf(priv, sizeof(priv), "%s/private", top);
	assert_int_equal(mkdir(shared, 0777), 0);
	assert_int_equal(chmod(shared, 01777), 0);
	assert_int_equal(mkdir(priv, 0700), 0);
	snprintf(secret, sizeof(secret), "%s/secret", priv);
	snprintf(created, sizeof(created), "%s/created", priv);
	snprintf(link, sizeof(link), "%s/report.json", shared);
	snprintf(dangle, sizeof(dangle), "%s/dangling.json", shared);
	snprintf(theirs, sizeof(theirs), "%s/theirs.json", shared);
	snprintf(mine, sizeof(mine), "%s/mine", priv);
	snprintf(mylink, sizeof(mylink), "%s/mine.json", shared);
	put(secret, "secret");
	assert_int_equal(chmod(secret, 0600), 0);

	/* Our own link in the shared directory is followed. */
	put(mine, "old");
	assert_int_equal(symlink(mine, mylink), 0);
	assert_int_equal(write_whole(mylink), 0);
	expect_text(mine, "whole");
	assert_int_equal(lstat(mylink, &st), 0);
	assert_true(S_ISLNK(st.st_mode));

	assert_int_equal(symlink(secret, link), 0);
	assert_int_equal(symlink(created, dangle), 0);
	put(theirs, "theirs");
	if (lchown(link, other, other) == 0 &&
	    lchown(dangle, other, other) == 0 &&
	    chown(theirs, other, other) == 0) {
		assert_int_equal(gm_file_begin(&f, link, &d), GM_EIO);
		assert_non_null(strstr(d.msg, "not followed"));
		expect_text(secret, "secret");
		assert_int_equal(lstat(link, &st), 0);
		assert_true(S_ISLNK(st.st_mode));

		assert_int_equal(gm_file_begin(&f, dangle, &d), GM_EIO);
		assert_non_null(strstr(d.msg, "not followed"));
		assert_int_not_equal(access(created, F_OK), 0);

		assert_int_equal(gm_file_begin(&f, theirs, &d), GM_EIO);
		assert_non_null(strstr(d.msg, "not replaced"));
		expect_text(theirs, "theirs");
		assert_int_equal(stat(theirs, &st), 0);
		assert_int_equal(st.st_uid, other);
	}
	/* The same links in a private directory are followed as before. */
	assert_int_equal(chmod(shared, 0755), 0);
	assert_int_equal(write_whole(dangle), 0);
	expect_text(created, "whole");

	unlink(link);
	unlink(dangle);
	unlink(theirs);
	unlink(mylink);
	unlink(mine);
	unlink(secret);
	unlink(created);
	rmdir(shared);
	rmdir(priv);
	rmdir(top);
}

/* Objects of many keys: lookups and replacement by hash, insertion
 * order kept, a repeated key replaces. 100,000 keys took minutes with
 * a linear search per set. */
static void many_keys(void **state)
{
	struct gm_val *o = gm_val_obj();
	char key[32];
	const size_t n = 100000;

	(void)state;
	for (size_t i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "k%zu", i);
		gm_obj_set_uint(o, key, i);
	}
	for (size_t i = 0; i < n; i += 7) {
		snprintf(key, sizeof(key), "k%zu", i);
		gm_obj_set_uint(o, key, i + 1);
	}
	assert_int_equal(gm_val_len(o), n);
	for (size_t i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "k%zu", i);
		assert_string_equal(gm_obj_key_at(o, i), key);
		assert_int_equal(gm_val_as_uint(gm_obj_get(o, key)),
				 i % 7 ? i : i + 1);
	}
	assert_null(gm_obj_get(o, "k100000"));
	assert_null(gm_obj_get(o, ""));
	gm_val_free(o);
}

/* Control characters of strings are escaped in tables and CSV, per JSON
 * in JSON and YAML (keys too); UTF-8 text passes unchanged. */
static void control_characters(void **state)
{
	struct gm_val *row = gm_val_obj(), *arr = gm_val_arr();
	char *s;

	(void)state;
	gm_obj_set_str(row, "host", "\x1b[2J\x1b]0;x\x07\xc2\x9b" "1m\xff"
		       "caf\xc3\xa9\n");
	gm_obj_set_str(row, "ke\x1by", "v");
	gm_arr_push(arr, row);
	s = render(arr, GM_FORMAT_TABLE);
	assert_non_null(strstr(s, "\\x1b[2J\\x1b]0;x\\x07\\u009b1m\\xffcaf"
				  "\xc3\xa9\\n"));
	assert_non_null(strstr(s, "ke\\x1by"));
	assert_null(strpbrk(s, "\x1b\x07"));
	free(s);
	s = render(arr, GM_FORMAT_CSV);
	assert_non_null(strstr(s, "\\x1b[2J"));
	assert_null(strpbrk(s, "\x1b\x07"));
	free(s);
	s = render(arr, GM_FORMAT_JSON);
	assert_non_null(strstr(s, "\\u001b[2J\\u001b]0;x\\u0007\\u009b1m"));
	assert_non_null(strstr(s, "\"ke\\u001by\""));
	free(s);
	s = render(arr, GM_FORMAT_YAML);
	assert_non_null(strstr(s, "\"ke\\u001by\": \"v\""));
	assert_null(strpbrk(s, "\x1b\x07"));
	free(s);
	gm_val_free(arr);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(json),      cmocka_unit_test(yaml),
		cmocka_unit_test(csv),       cmocka_unit_test(table),
		cmocka_unit_test(table_units),
		cmocka_unit_test(inspection), cmocka_unit_test(format_names),
		cmocka_unit_test(atomic_file),
		cmocka_unit_test(atomic_file_mode),
		cmocka_unit_test(atomic_file_special),
		cmocka_unit_test(atomic_file_shared_dir),
		cmocka_unit_test(many_keys),
		cmocka_unit_test(control_characters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
