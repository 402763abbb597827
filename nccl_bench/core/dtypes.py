"""Element sizes by torch's dtype name, known without torch: options are checked before any rank loads it,
and a rank without torch (nccl_bench.core.cudadriver) sizes its arrays by them."""

ELEMENT_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "int64": 8, "float16": 2, "float32": 4, "float64": 8,
                 "bfloat16": 2}
