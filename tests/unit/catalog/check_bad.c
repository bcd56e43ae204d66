/*
 * check_bad FILE.yaml EXPECTED: load a malformed catalog file and check
 * that gm_catalog_load() refuses it with GM_EINVAL and exactly the
 * message "FILE.yaml:EXPECTED" (EXPECTED is "line:column: message", or
 * ": message" when the fault has no position). Suite badinput.
 */
#include "catalog.h"
#include "error.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct gm_catalog cat;
	struct gm_diag diag = {{0}};
	char want[2048];
	int rc;

	if (argc != 3) {
		fprintf(stderr, "usage: check_bad FILE EXPECTED\n");
		return 2;
	}
	snprintf(want, sizeof(want), "%s%s%s", argv[1],
		 argv[2][0] == ':' ? "" : ":", argv[2]);
	rc = gm_catalog_load(&cat, argv[1], &diag);
	if (rc == 0) {
		gm_catalog_free(&cat);
		fprintf(stderr, "FAIL: %s was accepted\n", argv[1]);
		return 1;
	}
	if (rc != GM_EINVAL) {
		fprintf(stderr, "FAIL: %s: %s, want GM_EINVAL (%s)\n",
			argv[1], gm_err_name(rc), diag.msg);
		return 1;
	}
	if (strcmp(diag.msg, want) != 0) {
		fprintf(stderr, "FAIL: message\n got: %s\nwant: %s\n",
			diag.msg, want);
		return 1;
	}
	if (cat.gpus || cat.n || cat.owned) {
		fprintf(stderr, "FAIL: catalog not left empty\n");
		return 1;
	}
	printf("ok: %s\n", diag.msg);
	return 0;
}
