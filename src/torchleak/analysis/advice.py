"""Fix advice per finding kind, each pointing at its pattern in docs/leak-patterns.md."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Advice:
    fix: str
    pattern: str


_ADVICE: dict[str, Advice] = {
    "autograd_graph": Advice(
        "accumulate a number, not a tensor: `{name} += loss.item()` (or `loss.detach()`); "
        "a tensor sum keeps every step's autograd graph alive",
        "1. Loss summed as a tensor"),
    "tensor_list_graph": Advice(
        "store `x.detach()` (or `.item()` / `.detach().cpu()`) instead of the tensor with "
        "its graph, and clear `{name}` when its epoch ends",
        "2. Losses/outputs with their graph appended to a list"),
    "tensor_list": Advice(
        "clear `{name}` when it has been used (e.g. `.clear()` in the epoch-end hook), keep "
        "only what you need (`.item()`, a running mean), or bound it with `deque(maxlen=N)`",
        "4. Lightning step outputs not cleared / 5. Unbounded history lists"),
    "container": Advice(
        "bound `{name}`: `collections.deque(maxlen=N)`, a reset every epoch, or send the "
        "values to your logger instead of keeping them",
        "5. Unbounded history lists"),
    "metric_state": Advice(
        "call `.reset()` on the metric after `.compute()` every epoch (`{name}` grows by "
        "one batch per update)",
        "17. torchmetrics list states growing"),
    "hooks": Advice(
        "register the hook once outside the step, or keep the handle "
        "(`h = m.register_forward_hook(...)`) and call `h.remove()` when done",
        "14. Hooks registered every step"),
    "cache": Advice(
        "give the cache a bound and hashable keys: `@lru_cache(maxsize=N)` on plain "
        "values (tensors hash by id, so every batch is a new entry), or cache per instance",
        "23. lru_cache on samples/methods"),
    "figures": Advice(
        "close every figure after saving it: `plt.close(fig)` (or `plt.close('all')`), and "
        "use the Agg backend for headless training",
        "10. Matplotlib figures never closed"),
    "workers": Advice(
        "store the dataset's Python objects in numpy/arrow arrays or one bytes buffer "
        "(refcount writes un-share forked pages of Python lists/dicts), or disable "
        "persistent_workers so workers restart each epoch",
        "7. DataLoader workers copy on read / 8. persistent_workers"),
    "fragmentation": Advice(
        "set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` and bucket variable "
        "sequence lengths; this is cached memory, not a leak",
        "19. Allocator fragmentation"),
    "memory": Advice(
        "no named holder was found: run `torchleak check` on the training code, and look "
        "for C-extension caches, anomaly mode (`set_detect_anomaly`) or growing "
        "module-level state",
        "22. Anomaly detection left on / 16. Reference cycles"),
    "tensors": Advice(
        "live tensors grow without a named holder: they may be held by closures, exception "
        "tracebacks or reference cycles; `gc.collect()` to test for cycles",
        "16. Reference cycles holding CUDA tensors"),
}


def advice_for(kind: str, name: str = "") -> Advice:
    base = _ADVICE.get(kind, _ADVICE["memory"])
    short = name.split(" ")[0].split(".")[-1] if name else "it"
    return Advice(base.fix.replace("{name}", short), base.pattern)
