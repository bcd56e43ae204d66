"""selective - activation_checkpointing: selective, mapped onto transformers.

Korthikanti et al. 2022 (section 4.1) recompute only the attention core:
Q Kᵀ, mask, softmax, dropout and the product with V. In transformers those
ops are exactly one function per attention implementation: the model
module's `eager_attention_forward` for eager, and the `sdpa` entry of
ALL_ATTENTION_FUNCTIONS for sdpa. While the context manager is active both
are wrapped in torch.utils.checkpoint (non-reentrant); the rest of each
layer (projections, rotary embedding, MLP, norms, residuals) stores its
activations as without checkpointing. `calls` counts the wrapped calls so
the harness can refuse a transformers version whose model does not go
through these functions.
"""

import contextlib
import sys


class SelectiveAttention(contextlib.AbstractContextManager):
    def __init__(self, model):
        self.model = model
        self.calls = 0
        self._undo = []

    def _wrap(self, fn):
        from torch.utils.checkpoint import checkpoint

        def wrapped(module, query, key, value, attention_mask, *args,
                    **kwargs):
            self.calls += 1
            if not module.training or not query.requires_grad:
                return fn(module, query, key, value, attention_mask, *args,
                          **kwargs)
            return checkpoint(fn, module, query, key, value, attention_mask,
                              *args, use_reentrant=False, **kwargs)
        return wrapped

    def __enter__(self):
        from transformers import modeling_utils
        funcs = getattr(modeling_utils, "ALL_ATTENTION_FUNCTIONS", None)
        # transformers >= 4.50: a GeneralInterface whose class-wide
        # mapping all models read; 4.48-4.49: a plain dict.
        mapping = getattr(funcs, "_global_mapping", funcs)
        if isinstance(mapping, dict) and "sdpa" in mapping:
            old = mapping["sdpa"]
            mapping["sdpa"] = self._wrap(old)
            self._undo.append(lambda: mapping.__setitem__("sdpa", old))
        mods = {type(m).__module__ for m in self.model.modules()}
        for name in mods:
            mod = sys.modules.get(name)
            fn = getattr(mod, "eager_attention_forward", None)
            if fn is None:
                continue
            setattr(mod, "eager_attention_forward", self._wrap(fn))
            self._undo.append(
                lambda mod=mod, fn=fn: setattr(mod, "eager_attention_forward",
                                               fn))
        return self

    def __exit__(self, *exc):
        while self._undo:
            self._undo.pop()()
        return False
