"""TL402 (off by default): Python containers in a Dataset read by worker processes."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from torchleak.check.astutil import dotted, keyword, last_name
from torchleak.check.rules.base import Analysis, Finding, Rule

_LISTY_CALLS = {"list", "dict", "sorted", "listdir", "glob", "readlines", "tolist",
                "to_dict", "defaultdict"}
_LOADERS = {"json.load", "json.loads", "pickle.load", "pickle.loads", "yaml.load",
            "yaml.safe_load"}


def _listy(value: ast.AST) -> bool:
    if isinstance(value, (ast.List, ast.Dict, ast.ListComp, ast.DictComp)):
        return True
    return isinstance(value, ast.Call) and (last_name(value.func) in _LISTY_CALLS
                                            or dotted(value.func) in _LOADERS)


def _workers_used(a: Analysis) -> bool:
    for call, _ctx in a.index.calls:
        if last_name(call.func) == "DataLoader":
            workers = keyword(call, "num_workers")
            if workers is not None and not (isinstance(workers, ast.Constant)
                                            and workers.value == 0):
                return True
    return False


class DatasetPythonContainers(Rule):
    """## What it does
    Finds a `Dataset` whose `__init__` builds a Python list/dict (`json.load`, list
    comprehensions, `os.listdir`) that `__getitem__` reads, in a file that creates a
    `DataLoader` with `num_workers` not 0.

    ## Why is this bad?
    Reference-count updates in each worker touch the objects' pages, so each worker copies
    them ("copy-on-read") and worker memory grows through the epoch. Off by default: turn it
    on with `--extend-select TL4`.

    ## Example
    ```python
    class Captions(Dataset):
        def __init__(self, path):
            self.records = json.load(open(path))
        def __getitem__(self, i):
            return self.records[i]
    ```

    Use instead:
    ```python
    class Captions(Dataset):
        def __init__(self, path):
            self.records = np.array([json.dumps(r) for r in json.load(open(path))])
        def __getitem__(self, i):
            return json.loads(self.records[i])
    ```

    ## Fix safety
    No fix.
    """

    code = "TL402"
    name = "dataset-python-containers"
    summary = ("A Dataset keeps big Python lists/dicts that DataLoader workers copy on "
               "read (`num_workers > 0`).")

    def check(self, a: Analysis) -> Iterator[Finding]:
        if not _workers_used(a):
            return
        for cls in a.index.classes:
            if not any(dotted(b).endswith("Dataset") for b in cls.bases):
                continue
            methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
            init, getitem = methods.get("__init__"), methods.get("__getitem__")
            if init is None or getitem is None:
                continue
            read = {n.attr for n in ast.walk(getitem) if isinstance(n, ast.Attribute)}
            for node in ast.walk(init):
                if isinstance(node, ast.Assign) and _listy(node.value):
                    for t in node.targets:
                        if isinstance(t, ast.Attribute) and dotted(t.value) == "self" \
                                and t.attr in read:
                            yield Finding(node, f"`self.{t.attr}` is a Python list/dict read "
                                                f"in `__getitem__`; with `num_workers > 0` "
                                                f"every worker's refcount writes copy it page "
                                                f"by page; store it as a numpy array or "
                                                f"tensor instead")
