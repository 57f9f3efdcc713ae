"""Registries where user objects end up without a name in the user's code.

Torch's global hook tables, pyplot's open figures, logging handlers, ``atexit`` and
``weakref.finalize`` callbacks, live threads and the garbage collector's list of
uncollectable objects: each is measured as one holder, so a registry filled once per
step is named like a list would be.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from typing import Any

from torchleak.record.probes import access
from torchleak.record.probes.holder_sample import HolderSample, hooks_sample

_MODULE_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks",
                 "_global_backward_hooks", "_global_backward_pre_hooks",
                 "_global_forward_hooks_with_kwargs", "_global_buffer_registration_hooks",
                 "_global_module_registration_hooks", "_global_parameter_registration_hooks")
_OPTIMIZER_HOOKS = ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks")


def _ours(hook: Any) -> bool:
    return str(getattr(hook, "__module__", "") or "").startswith("torchleak")


def _table(module: Any, name: str) -> list[Any]:
    table = getattr(module, name, None)
    if access.container_base(table) is not dict:
        return []
    return [h for h in dict.values(table) if not _ours(h)]


_TORCH_TABLES = (("torch.nn.modules.module", _MODULE_HOOKS, "torch global module hooks"),
                 ("torch.optim.optimizer", _OPTIMIZER_HOOKS, "torch global optimizer hooks"))


def registry_samples() -> Iterator[HolderSample]:
    for module_name, tables, label in _TORCH_TABLES:
        module = sys.modules.get(module_name)
        for name in tables:
            hooks = _table(module, name)
            if hooks:
                sample = hooks_sample(f"{module_name}.{name}", hooks, "global")
                sample.detail["label"] = f"{label} ({name.lstrip('_')})"
                yield sample
    yield from _figures()
    yield from _logging_handlers()
    yield from _callbacks()
    yield from _threads()
    if gc.garbage:
        yield HolderSample("gc.garbage", "container", "list", len(gc.garbage),
                           detail={"label": "gc.garbage (uncollectable objects)"})


def _figures() -> Iterator[HolderSample]:
    helpers = sys.modules.get("matplotlib._pylab_helpers")
    if helpers is not None:
        figs = helpers.Gcf.figs
        yield HolderSample("matplotlib.pyplot open figures", "figures", "Figure", len(figs),
                           detail={"numbers": list(figs)[-5:]})


def _logging_handlers() -> Iterator[HolderSample]:
    logging = sys.modules.get("logging")
    if logging is None:
        return
    loggers = [logging.root] + [lg for lg in list(logging.Logger.manager.loggerDict.values())
                                if type(lg) is logging.Logger or access.is_a(lg, logging.Logger)]
    handlers = [h for lg in loggers for h in (access.attribute(lg, "handlers") or [])]
    if len(handlers) > 1:
        sample = hooks_sample("logging handlers", handlers, "logging")
        sample.detail["label"] = "logging handlers (all loggers)"
        yield sample


def _callbacks() -> Iterator[HolderSample]:
    atexit = sys.modules.get("atexit")
    count = atexit._ncallbacks() if atexit is not None and hasattr(atexit, "_ncallbacks") else 0
    if count > 1:
        yield HolderSample("atexit callbacks", "hooks", "atexit", int(count),
                           detail={"label": "atexit callbacks", "hook": "atexit.register"})
    weakref = sys.modules.get("weakref")
    registry = getattr(getattr(weakref, "finalize", None), "_registry", None)
    if access.container_base(registry) is dict and dict.__len__(registry) > 1:
        finalizers = [info.func for info in list(dict.values(registry))
                      if hasattr(info, "func")]
        sample = hooks_sample("weakref.finalize registry", finalizers, "weakref")
        sample.detail["label"] = "weakref.finalize callbacks"
        yield sample


def _threads() -> Iterator[HolderSample]:
    threading = sys.modules.get("threading")
    active = getattr(threading, "_active", None)
    if access.container_base(active) is dict and dict.__len__(active) > 2:
        names = [str(access.attribute(t, "_name") or "?") for t in list(dict.values(active))]
        yield HolderSample("threading live threads", "container", "Thread", len(names),
                           detail={"label": "live threads", "item_type": "Thread",
                                   "names": names[-5:]})
