"""pad_to: mmpack.Loader's fixed token width (CLIP's context length, 77), so that every batch has
one shape (torch.compile and CUDA graphs specialise on shapes; a new width recompiles)."""

from typing import Any, Optional

import numpy as np


def pad_tokens(tokens: Any, lengths: Any, pad_to: int, pad_id: int, eos_id: Optional[int]
               ) -> Any:
    """[B, L] int32 tokens -> [B, pad_to] int32 (a new numpy array), rows padded with pad_id;
    a row longer than pad_to keeps its first pad_to tokens, the last of them replaced by eos_id
    when the set's tokenizer has one (open_clip's tokenize(): truncate and keep the end token
    last). `lengths` ([B] int32) is clipped to pad_to in place."""
    b, width = tokens.shape
    out = np.full((b, pad_to), pad_id, dtype=np.int32)
    keep = min(width, pad_to)
    out[:, :keep] = tokens[:, :keep]
    cut = lengths > pad_to
    if eos_id is not None and eos_id >= 0 and cut.any():
        out[cut, pad_to - 1] = eos_id
    np.minimum(lengths, pad_to, out=lengths)
    return out
