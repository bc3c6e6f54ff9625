"""KindActivations: what a layer of one kind keeps and holds, per token, as planners consume it."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Mapping, Optional

# The op vector's ops a census fills, and "other" for the layer's own code.
OPS = ("linrec", "attBMM", "softmax", "dropout", "normOp", "ffAct", "attMM", "ffMM", "other")

# Fields stated both or neither.
_PAIRED = (("selective", "selective_tp"), ("selective_attention_mm", "selective_ffn_mm"), ("ops", "ops_tp"))
_SHARES = ("selective_attention_mm", "selective_ffn_mm")


@dataclasses.dataclass(frozen=True)
class KindActivations:
    """Bytes per token of one layer at micro-batch 1, split into the part TP does not divide and the part it does.

    At TP degree t a rank holds ``x + x_tp / t`` per token of each pair.
    """

    saved: float
    saved_tp: float
    working: float
    working_tp: float
    seq_length: int
    selective: Optional[float] = None
    selective_tp: Optional[float] = None
    selective_attention_mm: Optional[float] = None
    selective_ffn_mm: Optional[float] = None
    ops: Optional[Mapping[str, float]] = None
    ops_tp: Optional[Mapping[str, float]] = None

    def __post_init__(self) -> None:
        for first, second in _PAIRED:
            if (getattr(self, first) is None) != (getattr(self, second) is None):
                raise ValueError(f"KindActivations states one of {first} and {second} without the other")
        if isinstance(self.seq_length, bool) or not isinstance(self.seq_length, int) or self.seq_length <= 0:
            raise ValueError(f"KindActivations.seq_length must be a positive integer, not {self.seq_length!r}")
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in ("seq_length", "ops", "ops_tp") or value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
                raise ValueError(f"KindActivations.{field.name} must be a number, not {value!r}")
            if value < 0:
                raise ValueError(f"KindActivations.{field.name}: bytes per token cannot be negative ({value})")
            if field.name in _SHARES and value > 1:
                raise ValueError(f"KindActivations.{field.name}: a share of FLOPs cannot exceed 1 ({value})")
        for name in ("ops", "ops_tp"):
            ops = getattr(self, name)
            if ops is None:
                continue
            if not isinstance(ops, Mapping):
                raise ValueError(f"KindActivations.{name} must map ops to bytes per token, not {type(ops).__name__}")
            unknown = sorted(str(op) for op in set(ops) - set(OPS))
            if unknown:
                raise ValueError(f"KindActivations.{name} has unknown ops {unknown}; known: {list(OPS)}")
            for op, value in ops.items():
                if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
                    raise ValueError(f"KindActivations.{name}[{op!r}] must be a finite number, not {value!r}")
                if value < 0:
                    raise ValueError(f"KindActivations.{name}[{op!r}]: bytes per token cannot be negative ({value!r})")

    def to_dict(self) -> Dict[str, Any]:
        """The record as a mapping, fields that are None left out."""
        out = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                out[field.name] = dict(value) if field.name in ("ops", "ops_tp") else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "KindActivations":
        """The record of a mapping :meth:`to_dict` made; refuses unknown keys and missing required ones."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a KindActivations record must be a mapping, not {type(data).__name__}")
        names = {field.name for field in dataclasses.fields(cls)}
        required = {field.name for field in dataclasses.fields(cls) if field.default is dataclasses.MISSING}
        unknown, missing = sorted(str(key) for key in set(data) - names), sorted(required - set(data))
        if unknown or missing:
            raise ValueError(f"a KindActivations record has unknown keys {unknown} and lacks {missing}")
        return cls(**{name: dict(value) if name in ("ops", "ops_tp") and isinstance(value, Mapping) else value
                      for name, value in data.items()})


def activations_from_dict(data: Mapping[str, Any]) -> Dict[str, KindActivations]:
    """``{kind: KindActivations}`` of a ``{kind: record}`` mapping."""
    if not isinstance(data, Mapping):
        raise ValueError(f"activations must map each kind to its record, not {type(data).__name__}")
    return {str(kind): KindActivations.from_dict(record) for kind, record in data.items()}
