"""The fix for each kind of finding, and the catalogue pattern it links to.

Each fix is one that stops the growth when applied (not a mitigation), written with the
holder's own name, and points at its section in ``docs/patterns.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchleak.patterns import Pattern, pattern
from torchleak.vocab import FindingKind as K


@dataclass(frozen=True)
class Advice:
    fix: str
    pattern: Pattern


THREAD_ADVICE = "thread_state"  # a holder in another thread's frame
MODEL_ADVICE = "growing_model"  # a model's submodules or an optimizer's groups and state
WORKER_STATE_ADVICE = "worker_state"  # a Dataset container each worker fills for itself
# Mechanisms of torch and the interpreter (``detail["mechanism"]`` of a holder or switch).
MECHANISMS = ("warning_registry", "warnings_filters", "linecache", "sys_modules", "copyreg",
              "autocast", "profiler", "anomaly_mode", "saved_tensor_hooks")
_ADVICE: dict[str, Advice] = {
    K.AUTOGRAD_GRAPH: Advice(
        "accumulate a number, not a tensor: `{name} += loss.item()` (or keep "
        "`loss.detach()`); a tensor sum keeps every step's autograd graph alive",
        pattern("tensor-accumulator")),
    K.TENSOR_LIST_GRAPH: Advice(
        "store `x.detach()` (`.item()` for scalars, `.detach().cpu()` for big tensors) "
        "instead of the tensor with its graph, and clear `{name}` when its epoch ends",
        pattern("graph-in-container")),
    K.TENSOR_LIST: Advice(
        "clear `{name}` when it has been used (`.clear()` in the epoch-end hook), keep "
        "only what you need (`.item()`, a running mean), or bound it with "
        "`collections.deque(maxlen=N)`",
        pattern("tensors-in-containers")),
    K.TENSOR_GROWTH: Advice(
        "stop growing `{name}` in place (`torch.cat`/`np.concatenate` every step): keep a "
        "bounded window, or write the rows out and reset it",
        pattern("growing-buffer")),
    K.CONTAINER: Advice(
        "bound `{name}`: `collections.deque(maxlen=N)`, a reset every epoch, or send the "
        "values to your logger instead of keeping them",
        pattern("unbounded-history")),
    K.BUFFER: Advice(
        "flush `{name}` (to disk or your logger) and reset it, or keep only its tail "
        "(`{name} = {name}[-limit:]`)",
        pattern("growing-buffer")),
    MODEL_ADVICE: Advice(
        "the model gains parameters while it trains (a new `nn.Parameter` or module, "
        "`add_param_group`), and the optimizer keeps gradients and state for each: create "
        "them once before training, or remove the ones no longer used from the model and "
        "from the optimizer (`del` the submodule, a new optimizer over "
        "`model.parameters()`); never `.clear()` an optimizer's `state` or `param_groups`",
        pattern("growing-model")),
    THREAD_ADVICE: Advice(
        "the thread keeps `{name}` until a condition that may never come: flush it on a timer "
        "as well as on size, bound what it receives (`queue.Queue(maxsize=N)`), and drain and "
        "`join()` the thread when training ends",
        pattern("thread-state")),
    K.METRIC_STATE: Advice(
        "call `.reset()` on the metric after `.compute()` every epoch (`{name}` grows by "
        "one batch per update)",
        pattern("metric-state")),
    K.HOOKS: Advice(
        "register the hook once outside the step, or keep the handle "
        "(`h = m.register_forward_hook(...)`) and call `h.remove()` when done",
        pattern("hooks-every-step")),
    K.CACHE: Advice(
        "give the cache a bound and hashable keys: `@lru_cache(maxsize=N)` on plain "
        "values (tensors hash by identity, so every batch is a new entry), or cache per "
        "instance",
        pattern("unbounded-cache")),
    K.FIGURES: Advice(
        "close every figure after saving it: `plt.close(fig)` (or `plt.close('all')`), and "
        "use the Agg backend for headless training",
        pattern("figures-not-closed")),
    K.WORKER_MEMORY: Advice(
        "store the dataset's Python objects in numpy/Arrow arrays, tensors or one bytes "
        "buffer (reference-count writes un-share forked pages of Python lists and dicts)",
        pattern("worker-copy-on-read")),
    WORKER_STATE_ADVICE: Advice(
        "a Dataset container that `__getitem__` fills (here maybe `{name}`) grows in each "
        "DataLoader worker's own copy for as long as the worker lives: bound it "
        "(`functools.lru_cache(maxsize=N)`, `collections.deque(maxlen=N)`), build it once "
        "before the DataLoader starts, or drop it",
        pattern("unbounded-cache")),
    K.FRAGMENTATION: Advice(
        "set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` and bucket variable "
        "sequence lengths; this is cached memory, not a leak",
        pattern("cuda-fragmentation")),
    K.ALLOCATOR_RETENTION: Advice(
        "run with `torchleak run --safe` (it gives the allocator's freed pages back to the "
        "system), and keep numbers rather than many small tensors (`.item()` for a scalar, "
        "`.tolist()` for a few values): each small tensor kept pins the freed pages around it",
        pattern("allocator-retention")),
    K.NATIVE_MEMORY: Advice(
        "the memory is outside Python objects and tensors: free or reuse the native "
        "resource the growth follows (a C library's buffers, a handle opened per step); "
        "find the allocating call with `memray run --native {script}`",
        pattern("native-memory")),
    K.MEMORY: Advice(
        "no holder was named: run `torchleak check` on the training code, look for "
        "C-extension caches, anomaly mode (`set_detect_anomaly`) or module-level state, "
        "and take a snapshot with `torchleak attach RUN --walk` while it grows",
        pattern("unbounded-history")),
    K.TENSORS: Advice(
        "live tensors grow without a named holder: closures, exception tracebacks or "
        "reference cycles may keep them; `gc.collect()` tests for cycles",
        pattern("reference-cycles")),
}

_ADVICE.update({
    "warning_registry": Advice(
        "`warnings.warn` records every distinct message per code location in the module's "
        "`__warningregistry__` (even when the warning is hidden or routed to logging): keep "
        "per-step values out of the message (pass them to your logger instead), or silence "
        "it before the loop with `warnings.filterwarnings('ignore', message=...)` ('ignore' "
        "records nothing)",
        pattern("warning-registry")),
    "warnings_filters": Advice(
        "`warnings.filterwarnings`/`simplefilter` called every step appends a filter each "
        "time: call it once before training, or inside `warnings.catch_warnings()`",
        pattern("interpreter-registry")),
    "linecache": Advice(
        "`linecache.cache` keeps the source of every file a traceback or warning touched: "
        "code generated per step (`exec`, new file names) adds an entry each time; reuse the "
        "code or call `linecache.clearcache()` at epoch end",
        pattern("interpreter-registry")),
    "sys_modules": Advice(
        "a module is created every step (`importlib` of a generated name, `types.ModuleType` "
        "registered in `sys.modules`): create it once, or `del sys.modules[name]` when done",
        pattern("interpreter-registry")),
    "copyreg": Advice(
        "`copyreg.pickle` (or a registration in `copyreg.dispatch_table`) runs every step: "
        "register reducers once at import time",
        pattern("interpreter-registry")),
    "autocast": Advice(
        "the training loop runs inside one `torch.autocast` block, whose cast cache keeps "
        "a cast copy of every tensor that requires grad until the block exits (an input "
        "made to require grad, as in adversarial training, is a new entry every step): "
        "enter `torch.autocast` per step, around the forward pass and the loss, or pass "
        "`cache_enabled=False`",
        pattern("autocast-cache")),
    "profiler": Advice(
        "`torch.profiler` is recording the whole run and keeps every operator's events "
        "until it stops: give it a `schedule=torch.profiler.schedule(wait=1, warmup=1, "
        "active=3)` with `on_trace_ready` and call `prof.step()` each step, or stop it "
        "after a few steps",
        pattern("profiler-left-on")),
    "anomaly_mode": Advice(
        "autograd anomaly mode is on (`torch.autograd.set_detect_anomaly(True)`): it keeps "
        "a traceback for every graph node and slows each step; turn it on only while "
        "debugging one failure",
        pattern("anomaly-mode")),
    "saved_tensor_hooks": Advice(
        "saved-tensor hooks (`torch.autograd.graph.saved_tensors_hooks`, "
        "`save_on_cpu`) stay installed across steps: make sure `pack_hook` does not keep "
        "what it packs anywhere else (a list, a dict), and install them per step",
        pattern("saved-tensor-hooks")),
})

RETENTION_PREFIX = {
    K.ALLOCATOR_RETENTION: "The process grows much faster than `{name}` itself: freed "
                           "memory stays in the C allocator's heap; ",
    K.NATIVE_MEMORY: "The process grows much faster than `{name}` itself, outside Python "
                     "objects and tensors; ",
}


def advice_for(kind: str, name: str = "", script: str = "SCRIPT") -> Advice:
    """``name``: the holder's name as a user greps for it (``Finding.holder_name``)."""
    base = _ADVICE.get(kind, _ADVICE[K.MEMORY])
    return Advice(base.fix.replace("{name}", name or "it").replace("{script}", script),
                  base.pattern)
