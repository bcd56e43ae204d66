/*
 * family.c - the family table (family.h), built from list.h.
 */
#include "arch/family.h"

#define GM_NAME_(id, sym, name) [GM_ARCH_##id] = name,
const char *const gm_arch_names[GM_ARCH_N] = {GM_FAMILIES(GM_NAME_)};
#undef GM_NAME_

#define GM_ENTRY_(id, sym, name) [GM_ARCH_##id] = &gm_family_##sym,
static const struct gm_family *const families[GM_ARCH_N] = {
	GM_FAMILIES(GM_ENTRY_)};
#undef GM_ENTRY_

const struct gm_family *gm_family(enum gm_arch a)
{
	return families[(unsigned)a < GM_ARCH_N ? a : 0];
}
