/*
 * test_apply.c - gm_spec_apply() over a loaded spec gives the spec
 * gm_spec_load() gives with the same --set strings appended: every
 * section, every key's origin, the same return and message, for each
 * bundled spec and each change gpumem fit's search makes (fit_search.c)
 * and some the validator refuses. Prints TAP.
 * Usage: test-spec-apply DIR ...
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "spec.h"

/* Changes as gpumem fit spells them; NULL ends each. */
static const char *const changes[][5] = {
	{"training.activation_checkpointing=selective", NULL},
	{"training.activation_checkpointing=full", NULL},
	{"parallelism.zero_stage=3", NULL},
	{"parallelism.zero_stage=1", "parallelism.data_parallel=2", NULL},
	{"parallelism.data_parallel=16", NULL},
	{"parallelism.tensor_parallel=2", NULL},
	{"parallelism.tensor_parallel=8", NULL},
	{"training.micro_batch_size=1", "training.global_batch_size=64",
	 NULL},
	{"inference.batch_size=1", NULL},
	{"training.adapter=lora", NULL},
	{"training.activation_checkpointing=full", "parallelism.zero_stage=3",
	 "parallelism.data_parallel=64", "parallelism.tensor_parallel=4",
	 NULL},
	/* defaults that follow another key: the KV cache's dtype follows
	 * the weights' precision */
	{"task=inference", "inference.precision=fp32", NULL},
	/* refused: the same message both ways */
	{"parallelism.tensor_parallel=7", NULL},
	{"training.global_batch_size=3", NULL},
	{"parallelism.zero_stage=4", NULL},
};

static int count(const char *const *c)
{
	int n = 0;

	while (n < 5 && c[n])
		n++;
	return n;
}

/* Whether a and b are the same spec (sections and origins). */
static const char *differs(const struct gm_spec *a, const struct gm_spec *b)
{
	if (memcmp(&a->model, &b->model, sizeof(a->model)))
		return "model";
	if (memcmp(&a->training, &b->training, sizeof(a->training)))
		return "training";
	if (memcmp(&a->inference, &b->inference, sizeof(a->inference)))
		return "inference";
	if (memcmp(&a->parallelism, &b->parallelism, sizeof(a->parallelism)))
		return "parallelism";
	if (memcmp(&a->deepspeed, &b->deepspeed, sizeof(a->deepspeed)))
		return "deepspeed";
	if (a->task != b->task || strcmp(a->name, b->name) ||
	    strcmp(a->gpu, b->gpu))
		return "task, name or gpu";
	for (int i = 0; i < GM_SPEC_MAX_KEYS; i++)
		if (a->where[i].origin != b->where[i].origin ||
		    a->where[i].line != b->where[i].line ||
		    a->where[i].column != b->where[i].column)
			return "a key's origin";
	return NULL;
}

/* One spec file against every change; TAP lines from *no; failures. */
static int check(const char *path, int *no)
{
	static struct gm_spec base, want;
	struct gm_diag d = {{0}};
	int fail = 0;

	if (gm_spec_load(&base, path, NULL, 0, &d)) {
		printf("not ok %d - %s loads\n# %s\n", ++*no, path, d.msg);
		return 1;
	}
	for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++) {
		static struct gm_spec got;
		struct gm_diag dw = {{0}}, dg = {{0}};
		int n = count(changes[i]), rw, rg;
		const char *why = NULL;

		rw = gm_spec_load(&want, path, changes[i], n, &dw);
		gm_spec_load(&got, path, NULL, 0, &dg);
		rg = gm_spec_apply(&got, changes[i], n, &dg);
		if (rw != rg)
			why = "return";
		else if (rw && strcmp(dw.msg, dg.msg))
			why = "message";
		else if (!rw)
			why = differs(&want, &got);
		if (why)
			fail++;
		printf("%s %d - %s --set %s%s: %s\n", why ? "not ok" : "ok",
		       ++*no, path, changes[i][0], n > 1 ? " ..." : "",
		       why ? why : rw ? "refused alike" : "same spec");
		if (why)
			printf("# load: %d %s\n# apply: %d %s\n", rw, dw.msg,
			       rg, dg.msg);
	}
	return fail;
}

int main(int argc, char **argv)
{
	int no = 0, fail = 0, specs = 0;

	for (int a = 1; a < argc; a++) {
		struct dirent **list;
		int n = scandir(argv[a], &list, NULL, alphasort);

		if (n < 0) {
			printf("Bail out! cannot read %s\n", argv[a]);
			return 1;
		}
		for (int i = 0; i < n; i++) {
			const char *f = list[i]->d_name;
			size_t len = strlen(f);
			char path[2048];

			if (len > 5 && !strcmp(f + len - 5, ".yaml") &&
			    strcmp(f, "gpus.yaml")) {
				snprintf(path, sizeof(path), "%s/%s", argv[a],
					 f);
				fail += check(path, &no);
				specs++;
			}
			free(list[i]);
		}
		free(list);
	}
	printf("%s %d - specs checked: %d\n", specs ? "ok" : "not ok", ++no,
	       specs);
	printf("1..%d\n", no);
	return fail || !specs;
}
