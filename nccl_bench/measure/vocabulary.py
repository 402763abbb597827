"""The measuring floor's vocabulary: element types by nccl-tests' names and torch's, their sizes,
the reductions, and sizes written as nccl-tests takes them (8, 64K, 1M, 8G). No torch here: options are
checked with it before any job starts."""
from __future__ import annotations

import re

from nccl_bench.core.dtypes import ELEMENT_BYTES
from nccl_bench.core.errors import UsageError

# nccl-tests' type names (and common aliases) -> torch dtype name
DTYPES = {"int8": "int8", "char": "int8", "uint8": "uint8", "int32": "int32", "int": "int32",
          "int64": "int64", "half": "float16", "float16": "float16", "fp16": "float16",
          "float": "float32", "float32": "float32", "fp32": "float32", "double": "float64",
          "float64": "float64", "bfloat16": "bfloat16", "bf16": "bfloat16"}
TYPE_NAMES = {"int8": "int8", "uint8": "uint8", "int32": "int32", "int64": "int64", "float16": "half",
              "float32": "float", "float64": "double", "bfloat16": "bfloat16"}
__all__ = ["DTYPES", "ELEMENT_BYTES", "TYPE_NAMES", "OPS", "ALL_TYPES", "FLOATING", "parse_size", "MAX_SIZE"]
OPS = ("sum", "prod", "min", "max", "avg")
ALL_TYPES = ("int8", "uint8", "int32", "int64", "half", "float", "double", "bfloat16")  # -d all (nccl-tests' names)
FLOATING = ("float16", "float32", "float64", "bfloat16")
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str, what: str) -> int:
    """'8', '64K', '1M', '1.5M', '8G' (powers of 1024, as nccl-tests, whose sizes may have a fraction) -> bytes; a
    size that is no whole number of bytes is bad input."""
    m = re.fullmatch(r"\s*(\d{1,20}(?:\.\d{0,12})?|\.\d{1,12})\s*([KMGT]?)B?\s*", str(text), re.IGNORECASE)
    if not m:
        shown = str(text) if len(str(text)) <= 40 else f"{str(text)[:40]}... ({len(str(text))} characters)"
        raise UsageError(f"{what}: '{shown}' is not a size (e.g. 8, 64K, 1.5M, 8G)")
    whole, _, fraction = m.group(1).partition(".")
    unit = _SUFFIX[m.group(2).upper()]
    scaled = int(whole or 0) * unit * 10 ** len(fraction) + int(fraction or 0) * unit
    size, left = divmod(scaled, 10 ** len(fraction))  # exact: no float rounds a byte away
    if left:
        raise UsageError(f"{what}: '{text}' is not a whole number of bytes")
    if size > MAX_SIZE:
        raise UsageError(f"{what}: {text} is more than any GPU holds ({MAX_SIZE >> 40} TiB)")
    return size


MAX_SIZE = 1 << 44  # 16 TiB: above any buffer a GPU or host holds
