"""The closed sets of names a workload's options take besides its data types (specs.dtypes): the attention
kernel and the fusions. Literals only, no pydantic, so that the command line's help lists them without loading
the schemas; specs.workload validates them."""

from __future__ import annotations

from typing import Literal, get_args

# naive: QKᵀ scores, softmax and P·V as three kernels, the scores through HBM; flash: one kernel, scores on chip.
AttentionImpl = Literal["naive", "flash"]
ATTENTION_IMPLS: tuple[AttentionImpl, ...] = get_args(AttentionImpl)
# Fusions the engine knows. Each removes an HBM round trip (see engine/count/transformer.py for the exact byte changes):
#   qkv          one matmul for Q, K and V: x is read once instead of three times
#   gate_up      one matmul for gate and up: x is read once instead of twice
#   norm_linear  RMSNorm in the prologue of the projections that follow it: the normalized x is never written
#   act          SiLU(gate)·up in the epilogue of gate_up: gate and up never reach HBM (needs gate_up)
#   residual     the residual add in the epilogue of o_proj and down_proj
Fusion = Literal["qkv", "gate_up", "norm_linear", "act", "residual"]
FUSIONS: tuple[Fusion, ...] = get_args(Fusion)
