/* error.c - GM_E* codes, their names and messages (see error.h). */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

const char *gm_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
#define GM__ERR_DESC(name, val, desc)                                      \
	case GM_E##name:                                                   \
		return desc;
		GM_ERRNO_MAP(GM__ERR_DESC)
#undef GM__ERR_DESC
	}
	return "unknown error";
}

const char *gm_err_name(int err)
{
	switch (err) {
	case 0:
		return "GM_OK";
#define GM__ERR_NAME(name, val, desc)                                      \
	case GM_E##name:                                                   \
		return "GM_E" #name;
		GM_ERRNO_MAP(GM__ERR_NAME)
#undef GM__ERR_NAME
	}
	return "GM_EUNKNOWN";
}

int gm_exit_code(int err)
{
	if (err == 0)
		return GM_EXIT_OK;
	if (err == GM_EDEVICE || err == GM_ENODEV)
		return GM_EXIT_DEVICE;
	return GM_EXIT_USAGE;
}

int gm_diag_set(struct gm_diag *diag, int err, const char *fmt, ...)
{
	va_list ap;

	if (!diag)
		return err;
	va_start(ap, fmt);
	vsnprintf(diag->msg, sizeof(diag->msg), fmt, ap);
	va_end(ap);
	return err;
}
