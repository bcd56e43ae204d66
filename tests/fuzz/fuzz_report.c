/*
 * fuzz_report.c - libFuzzer target over the report reader and merge of
 * `gpumem report` (gm_json_load, gm_report_merge): any bytes are read as
 * a report file; one that reads is merged with itself (as two ranks)
 * and the merged tree printed in every format.
 * Every refusal has a message; nothing crashes, leaks or overflows
 * (ASan, UBSan).
 * Build and run: tests/fuzz/run.sh SECONDS BUILD_DIR report.
 */
#include "emit.h"
#include "error.h"
#include "merge.h"

#include "fuzz_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct gm_json_marks *marks[2];
	struct gm_val *docs[2], *merged = NULL;
	const char *paths[2] = {"a.json", "b.json"};
	struct gm_diag d;
	FILE *null;
	int rc;

	d.msg[0] = '\0';
	if (gm_json_load(fuzz_input_path(data, size), &docs[0], &marks[0],
			 &d)) {
		if (!d.msg[0])
			abort();
		return 0;
	}
	docs[1] = docs[0];
	marks[1] = marks[0];
	d.msg[0] = '\0';
	rc = gm_report_merge(docs, paths, marks, 2, &merged, &d);
	if (rc && !d.msg[0])
		abort();
	if (!rc) {
		null = fopen("/dev/null", "w");
		if (!null)
			abort();
		for (int f = GM_FORMAT_TABLE; f <= GM_FORMAT_CSV; f++)
			if (gm_emit(null, merged, (enum gm_format)f))
				abort();
		fclose(null);
		gm_val_free(merged);
	}
	gm_val_free(docs[0]);
	gm_json_marks_free(marks[0]);
	return 0;
}
