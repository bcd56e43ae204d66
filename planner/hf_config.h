/*
 * hf_config.h - `model.hf_config: FILE`: a Hugging Face config.json as the
 * source of a spec's model section (hf_config.c).
 *
 * The file's model_type picks the family (llama, mistral, qwen2 -> llama;
 * gpt2; bert; mixtral; qwen3; qwen3_moe -> qwen3-moe; gpt_neox ->
 * gpt-neox; deepseek_v3 -> deepseek-v3); a table per family maps its
 * fields to spec keys. Keys written in the spec (the file or --set) keep
 * their values; every key filled from the config remembers the field's
 * line:column there, so later rules blame "config.json:L:C: FIELD (KEY)".
 * models/README.md documents the map.
 */
#ifndef GM_HF_CONFIG_H
#define GM_HF_CONFIG_H

#include <stddef.h>

struct gm__spec_ctx;

/*
 * Fill the model section of c->spec from the config.json named by
 * model.hf_config (a path relative to the spec file's directory; one from
 * --set is relative to the current directory). Call after the spec file
 * and the --set options, before defaults. Returns 0, GM_EINVAL (diag
 * "file:line:column: ..." in the config.json or at the spec key), GM_EIO
 * (diag names the spec key and the file that cannot be opened), GM_ENOMEM.
 */
int gm__hf_config_apply(struct gm__spec_ctx *c);

/* The model_type names the reader knows, ", "-separated, into buf. */
void gm_hf_config_known(char *buf, size_t len);

#endif
