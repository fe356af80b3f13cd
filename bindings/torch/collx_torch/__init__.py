"""collx as a torch.distributed backend.

    import collx_torch                      # registers backend "collx"
    torch.distributed.init_process_group("collx", ...)

Every process group of backend "collx" runs its collectives over one collx communicator
(docs/torch.md lists the operations, dtypes and reduce ops). collx's failures raise
collx_torch.CollxError, a RuntimeError whose message is collx's own (status name, the
collective, the rank or peer at fault).
"""
import torch.distributed as _dist

from ._collx_torch import CollxError, collx_version, create_process_group

BACKEND = "collx"


def _register():
    # Importing twice (or from two names) must not register twice: torch asserts on that.
    if BACKEND.upper() in _dist.Backend._plugins:
        return
    _dist.Backend.register_backend(BACKEND, create_process_group)


_register()

__all__ = ["BACKEND", "CollxError", "collx_version", "create_process_group"]
