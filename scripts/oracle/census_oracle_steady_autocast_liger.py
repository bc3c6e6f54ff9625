#!/usr/bin/env python3
"""Census steady-state step oracle, AUTOCAST WITH LIGER'S KERNELS: the autocast oracle's wrapped forward over a model
Liger's patch has been applied to, as TRL's SFTTrainer runs ``use_liger_kernel=True`` beside ``bf16=True``.

This file imports the optimizers oracle, then ``census_oracle_steady_liger.py`` (Liger's patch, its fused loss as the
loss oracle's ``liger-flce``; ``census_oracle_liger_patch.py`` says what of Liger runs and what is stood in for), then
``census_oracle_steady_autocast.py`` (the fp32 or bf16 load, CUDA's autocast policy, accelerate's wrapped forward),
and edits nothing in them: each kind below names what it runs of each. Liger's patch is applied before accelerate
wraps the forward, as the Trainer applies it in its constructor and accelerate wraps the model in ``train()``. Its
kernels are ``torch.autograd.Function``s no autocast list names: they run on the dtypes they are handed, and the
products inside its fused loss are cast as any product is.

The kinds here are Liger's alone: with Liger's module in the chain, the LoRA oracle's kinds are not run from this file
(``census_oracle_steady_autocast.py`` runs them).
"""
import os
import sys
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import census_oracle_steady_optim as OPTIM  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
import census_oracle_steady_liger as LIGER  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import
import census_oracle_steady_autocast as AC  # noqa: E402  pylint: disable=wrong-import-position

E = AC.E

LIGER_AUTOCAST_KINDS: Dict[str, Dict[str, Any]] = {
    # TRL's use_liger_kernel (its loss nll: Liger's fused linear cross-entropy), checkpointing, bf16=True
    "single_adamw_liger_autocast_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full", liger=True,
                                                       loss="liger-flce", autocast=True),
    "single_adamw_liger_autocast_load_bf16_ac_full_steady": dict(m=1, batch=1, foreach=False, ac="full", liger=True,
                                                                 loss="liger-flce", autocast=True, load="bf16"),
    # Liger's kernels with Transformers' own loss
    "single_adamw_liger_hf_autocast_steady": dict(m=1, batch=1, foreach=False, liger=True, autocast=True),
}

E.KINDS_EXT = LIGER_AUTOCAST_KINDS
E.KINDS = dict(E.KINDS, **LIGER_AUTOCAST_KINDS)
E.EXT_FAMILIES = {k: LIGER.LIGER_FAMILIES for k in LIGER_AUTOCAST_KINDS}  # every family Liger patches
E.EXT = "census_oracle_steady_autocast_liger"
E.__file__ = os.path.abspath(__file__)  # the orchestrator starts its workers from this file

if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--kinds" not in argv and "--worker" not in argv:
        argv += ["--kinds", ",".join(LIGER_AUTOCAST_KINDS)]
    sys.exit(E.main(argv))
