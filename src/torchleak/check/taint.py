"""Does a value carry an autograd graph? A small, flow-aware taint analysis per function.

Evidence a value carries a graph: it comes from a model or loss call (``model(x)``,
``criterion(out, y)``, ``F.cross_entropy``), from arithmetic or tensor methods on such a
value, or ``.backward()`` is called on it. ``.item()``, ``.detach()``, ``float()``,
``.numpy()`` and code under ``no_grad`` end the graph. Without evidence we say no:
default-on rules must be precise.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from torchleak.check.astutil import Position, dotted, is_const, keyword, last_name, names_in, pos
from torchleak.check.astutil import tokens
from torchleak.check.astutil import walk_local
from torchleak.check.context import Ctx, ModuleIndex, grad_mode_of
from torchleak.check.steps import is_backward_call, is_model_function

_SOURCE_TOKENS = {
    "model", "net", "network", "encoder", "decoder", "generator", "discriminator",
    "backbone", "classifier", "critic", "unet", "vae", "transformer", "forward", "criterion",
    "loss", "entropy", "kl", "encode", "decode", "head", "actor", "policy", "lm",
}
_NOT_COMPUTING_VERBS = {"evaluate", "eval", "validate", "test", "log", "save", "plot", "load",
                        "print", "build", "make", "create", "init", "setup", "register",
                        "update", "sync", "freeze", "unfreeze", "prepare", "wrap", "unwrap",
                        "get", "set", "is", "has", "check", "export", "convert"}
_KILL_METHODS = {"item", "tolist", "numpy", "detach", "detach_", "argmax", "argmin",
                 "nonzero", "size", "dim", "numel", "eq", "ne", "gt", "lt", "ge", "le",
                 "all", "any", "isnan", "isinf", "isfinite"}
_KILL_FUNCS = {"float", "int", "bool", "str", "len", "round", "repr", "format", "isinstance",
               "print", "id", "type", "list_of_floats"}
_KILL_ATTRS = {"data", "grad", "shape", "dtype", "device", "requires_grad", "ndim"}
_PROPAGATE_FUNCS = {"sum", "max", "min", "abs", "tuple", "list"}
# Name words that denote a loss/output tensor; used only for names the file never
# defines (an excerpt), where there is no other evidence to go on.
_HINT_WORDS = {"loss", "iou", "miou", "acc", "accuracy", "dice", "logits", "logit", "out",
               "output", "outputs", "pred", "preds", "prediction", "predictions", "yhat",
               "recon", "score"}
_MAX_DEPTH = 12
_TORCH_PREFIXES = ("torch.", "F.", "nn.functional.")
# Tensor methods pass a graph on (judged by their receiver); they never create one.
_TENSOR_METHODS = {
    "cpu", "cuda", "to", "float", "half", "double", "long", "int", "bool", "bfloat16", "view",
    "reshape", "permute", "transpose", "squeeze", "unsqueeze", "flatten", "contiguous",
    "clone", "mean", "sum", "max", "min", "softmax", "log_softmax", "sigmoid", "exp", "log",
    "abs", "clamp", "chunk", "split", "narrow", "expand", "repeat", "masked_fill", "type",
    "type_as", "pow", "sqrt", "norm", "std", "var", "prod", "cumsum", "round", "t", "view_as",
    "expand_as", "unbind", "topk", "sort", "gather", "index_select", "flip", "roll", "mul",
    "add", "sub", "div", "matmul", "squeeze_", "unsqueeze_", "fill_", "zero_", "masked_select",
}
# Calls whose results are plain data even when the checker cannot see into them.
_PLAIN_MODULES = {
    "np", "numpy", "math", "os", "sys", "time", "json", "random", "re", "logging", "logger",
    "log", "pd", "pandas", "PIL", "Image", "cv2", "plt", "matplotlib", "scipy", "sklearn",
    "itertools", "functools", "collections", "copy", "pickle", "yaml", "tqdm", "wandb",
    "shutil", "glob", "pathlib", "datetime", "statistics", "string", "warnings", "io", "csv",
    "imageio", "torchvision", "self.log", "writer", "tokenizer", "processor", "args",
    "config", "cfg", "metric", "metrics", "evaluate", "accelerator", "dist", "tb", "mlflow",
    "env", "envs", "eval_env", "vec_env", "environment", "dataset", "loader", "dataloader",
    "trainer", "callback", "callbacks", "hf_quantizer", "quantizer", "state", "control",
}
_PLAIN_METHODS = {
    "format", "join", "split", "strip", "lower", "upper", "replace", "items", "keys",
    "values", "get", "decode", "batch_decode", "encode", "read", "readline", "readlines",
    "write", "tolist", "startswith", "endswith", "count", "index", "copy", "append",
    "extend", "pop", "update", "log", "info", "debug", "warning", "save", "savefig",
    "compute", "state_dict", "parameters", "named_parameters", "modules", "children",
    "generate", "numpy", "item", "exists", "open", "close", "flush", "eval", "train", "to_dict",
    "gather_for_metrics", "gather", "reduce", "wait", "result", "sample_indices", "size",
    "predict", "step", "reset", "from_pretrained",
}


@dataclass(frozen=True)
class Def:
    pos: Position
    value: ast.AST | None
    index: int | None  # element of a tuple unpacking
    grad_off: bool


@dataclass
class ScopeFacts:
    defs: dict[str, list[Def]] = field(default_factory=dict)
    backward: dict[str, list[Position]] = field(default_factory=dict)
    consumed: set[str] = field(default_factory=set)
    model_code: bool = False  # inside ``forward``: ``self.fc1(x)`` runs a submodule


def is_source_call(call: ast.Call) -> bool:
    """A call that returns a graph-carrying tensor: a model forward or a loss."""
    func = call.func
    if isinstance(func, ast.Name) and func.id == "self":
        return True
    name = last_name(func)
    if not name or (name[0].isupper() and len(name) > 1):
        return False  # ``MyModel(...)`` / ``nn.MSELoss()`` construct, they do not compute
    words = tokens(name)
    if len(words) > 1 and words[0] in _NOT_COMPUTING_VERBS:
        return False  # ``evaluate_policy(...)``, ``build_model(...)``: not a forward pass
    last = words[-1] if words else ""
    return last in _SOURCE_TOKENS or last.endswith(("net", "loss")) or last.startswith("net")


def looks_opaque(call: ast.Call) -> bool:
    """A method call on an object the checker knows nothing about
    (``evaluator.create_samples(...)``, ``self.renderer.render(rays)``): in evaluation code
    with autograd on its result may carry a graph. Plain-data APIs are not opaque, nor
    ``self.method(...)`` that this module does not define (often a stored function)."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False  # a plain function: only one of this module is looked into
    receiver = dotted(func.value)
    if not receiver or receiver == "self" or func.attr in _PLAIN_METHODS or func.attr in _TENSOR_METHODS \
            or func.attr.startswith(("_", "to_")):
        return False
    if func.attr[0].isupper():
        return False  # ``nn.Linear(...)``: constructs an object
    head = receiver.split(".")[0]
    return head not in _PLAIN_MODULES and receiver not in _PLAIN_MODULES \
        and receiver.split(".")[-1] not in _PLAIN_MODULES


def _submodule_call(call: ast.Call) -> bool:
    func = call.func
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
        and func.value.id == "self" and not func.attr.startswith("_") \
        and func.attr not in _PLAIN_METHODS


def name_hints_tensor(name: str) -> bool:
    words = tokens(name)
    return bool(words) and (words[-1] in _HINT_WORDS or words[0] == "loss")


class Taint:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self._facts: dict[int, ScopeFacts] = {}

    def facts(self, scope: ast.AST | None) -> ScopeFacts:
        key = id(scope)
        if key not in self._facts:
            self._facts[key] = self._collect(scope or self.index.tree)
            self._facts[key].model_code = is_model_function(scope)
        return self._facts[key]

    def carries_graph(self, expr: ast.AST, ctx: Ctx, at: Position | None = None,
                      opaque: bool = False) -> bool:
        """``opaque``: results of calls the checker cannot see into (``evaluator.render(x)``)
        count as carrying a graph; used where autograd is on in evaluation code."""
        facts = self.facts(ctx.func)
        return self._expr(expr, facts, at or pos(expr), 0, frozenset(), opaque)

    def backward_called(self, name: str, ctx: Ctx) -> bool:
        """``name.backward()`` (or ``backward(name)``) appears in the scope."""
        return name in self.facts(ctx.func).backward

    def is_backwarded(self, name: str, ctx: Ctx) -> bool:
        """The name flows into a ``.backward()``: graph building is intended."""
        return name in self.facts(ctx.func).consumed

    def _opaque(self, call: ast.Call, facts: ScopeFacts) -> bool:
        """The result of a call the checker cannot see into, or of a function of this
        module that runs a model with autograd on."""
        if self._local_receiver(call, facts):
            return False
        callees = self._module_functions().get(last_name(call.func))
        if callees:
            return any(self._runs_model_with_grad(f) for f in callees)
        return looks_opaque(call)

    @staticmethod
    def _local_receiver(call: ast.Call, facts: ScopeFacts) -> bool:
        """``x.method()`` on a variable assigned in this function: ``x``'s own value
        decides, not the call (parameters and globals stay unknown)."""
        func = call.func
        return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id in facts.defs

    def _module_functions(self) -> dict[str, list[ast.AST]]:
        found = self.index.cache.get("functions_by_name")
        if not isinstance(found, dict):
            found = {}
            for func, _ctx in self.index.funcs:
                found.setdefault(func.name, []).append(func)
            self.index.cache["functions_by_name"] = found
        return found

    def _returns_graph_of(self, call: ast.Call) -> bool:
        """``loss = self.train_step(batch)`` where this module's ``train_step`` returns
        its loss with the graph."""
        func = call.func
        if not (isinstance(func, ast.Name) or (isinstance(func, ast.Attribute)
                                               and dotted(func.value) == "self")):
            return False
        callees = self._module_functions().get(last_name(func))
        return bool(callees) and any(self._returns_graph(f) for f in callees)

    def _returns_graph(self, func: ast.AST) -> bool:
        key = ("returns_graph", id(func))
        if key not in self.index.cache:
            self.index.cache[key] = False  # a recursive call is not evidence
            decorated = any(grad_mode_of(d) is not None
                            for d in getattr(func, "decorator_list", ()))
            found = False
            if not decorated:
                for node in walk_local(func):
                    ctx = self.index.stmt_ctx.get(node) if isinstance(node, ast.Return) \
                        else None
                    if ctx is not None and node.value is not None and not ctx.grad_off \
                            and self.carries_graph(node.value, ctx):  # type: ignore[union-attr]
                        found = True
                        break
            self.index.cache[key] = found
        return bool(self.index.cache[key])

    def _runs_model_with_grad(self, func: ast.AST) -> bool:
        key = ("runs_model", id(func))
        if key not in self.index.cache:
            decorated = any(grad_mode_of(d) is not None
                            for d in getattr(func, "decorator_list", ()))
            self.index.cache[key] = not decorated and any(
                not ctx.grad_off and is_source_call(call)
                for call, ctx in self.index.calls_in(func))
        return bool(self.index.cache[key])

    # -- collection ------------------------------------------------------------------
    def _collect(self, scope: ast.AST) -> ScopeFacts:
        facts = ScopeFacts()
        stmt_ctx = self.index.stmt_ctx
        for node in walk_local(scope):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                ctx = stmt_ctx.get(node)
                off = bool(ctx and ctx.grad_off)
                value = node.value
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    self._add_target(facts, target, value, node, off)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                self._add_target(facts, node.target, None, node, False)
            elif isinstance(node, ast.NamedExpr):
                self._add_target(facts, node.target, node.value, node, False)
            elif isinstance(node, ast.Call) and is_backward_call(node):
                for name in _backward_names(node):
                    facts.backward.setdefault(name, []).append(pos(node))
        for defs in facts.defs.values():
            defs.sort(key=lambda d: d.pos)
        self._consumed(facts)
        return facts

    @staticmethod
    def _add_target(facts: ScopeFacts, target: ast.AST, value: ast.AST | None,
                    stmt: ast.AST, off: bool) -> None:
        if isinstance(target, ast.Name):
            facts.defs.setdefault(target.id, []).append(Def(pos(stmt), value, None, off))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, elt in enumerate(target.elts):
                if isinstance(elt, ast.Name):
                    facts.defs.setdefault(elt.id, []).append(Def(pos(stmt), value, i, off))

    @staticmethod
    def _consumed(facts: ScopeFacts) -> None:
        consumed = set(facts.backward)
        for _ in range(6):
            before = len(consumed)
            for name in list(consumed):
                for d in facts.defs.get(name, ()):
                    if d.value is not None:
                        consumed |= names_in(d.value)
            if len(consumed) == before:
                break
        facts.consumed = consumed

    # -- evaluation ------------------------------------------------------------------
    def _expr(self, node: ast.AST, facts: ScopeFacts, at: Position, depth: int,
              killed: frozenset[str], opaque: bool = False) -> bool:
        if depth > _MAX_DEPTH:
            return False
        rec = lambda n, k=killed: self._expr(n, facts, at, depth + 1, k, opaque)  # noqa: E731
        if isinstance(node, ast.Name):
            return node.id not in killed and self._name(node.id, facts, at, depth, opaque)
        if isinstance(node, ast.Call):
            return self._call(node, rec, facts, opaque)
        if isinstance(node, ast.Attribute):
            return node.attr not in _KILL_ATTRS and rec(node.value)
        if isinstance(node, (ast.Subscript, ast.Starred)):
            return rec(node.value)
        if isinstance(node, ast.BinOp):
            return rec(node.left) or rec(node.right)
        if isinstance(node, ast.UnaryOp):
            return not isinstance(node.op, ast.Not) and rec(node.operand)
        if isinstance(node, ast.IfExp):
            return rec(node.body) or rec(node.orelse, killed | _isinstance_tensor(node.test))
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(rec(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            return any(rec(v) for v in node.values)
        return False

    def _call(self, node: ast.Call, rec, facts: ScopeFacts,  # noqa: ANN001 - a closure
              opaque: bool) -> bool:
        func = node.func
        name = last_name(func)
        if name in _KILL_FUNCS and isinstance(func, ast.Name):
            return False
        full = dotted(func)
        if full.startswith(("np.", "numpy.", "math.", "statistics.")):
            return False
        if full.endswith("autograd.grad") and keyword(node, "create_graph") is None:
            return False  # gradients, not a graph
        if isinstance(func, ast.Attribute) and name in _KILL_METHODS:
            return False
        if is_source_call(node) or (facts.model_code and _submodule_call(node)) \
                or self._returns_graph_of(node):
            return True
        if isinstance(func, ast.Attribute) and not full.startswith("torch.") and rec(func.value):
            return True  # a tensor method: loss.mean(), out.cpu(), out.view(-1)
        if full.startswith(_TORCH_PREFIXES) or (isinstance(func, ast.Name)
                                                and func.id in _PROPAGATE_FUNCS):
            return any(rec(a) for a in node.args)
        return opaque and self._opaque(node, facts)

    def _name(self, name: str, facts: ScopeFacts, at: Position, depth: int,
              opaque: bool = False) -> bool:
        defs = facts.defs.get(name, ())
        before = [d for d in defs if d.pos < at]
        d = before[-1] if before else None
        if d is not None and not d.grad_off and d.value is not None:
            judge = (lambda c: self._opaque(c, facts)) if opaque else None
            value = _element(d.value, d.index, name, judge)
            if value is not None and self._expr(value, facts, d.pos, depth + 1, frozenset(),
                                                opaque):
                return True
            if value is not None and _is_killer(value):
                return False
        start = d.pos if d is not None else (0, 0)
        if d is not None and d.grad_off:
            return False
        return any(p > start for p in facts.backward.get(name, ()))


def _backward_names(call: ast.Call) -> set[str]:
    """Names (and ``self.x`` chains) whose graph a backward call consumes."""
    found: set[str] = set()
    parts: list[ast.AST] = [call]
    if isinstance(call.func, ast.Attribute) and call.args:
        # ``accelerator.backward(loss)``, ``fabric.backward(loss)``: the argument is the
        # tensor, the receiver is an engine
        parts = list(call.args) + [k.value for k in call.keywords]
    for node in (n for part in parts for n in ast.walk(part)):
        if isinstance(node, ast.Name) and node.id != "self":
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and dotted(node).startswith("self."):
            found.add(dotted(node))
    return found


def _element(value: ast.AST, index: int | None, name: str,
             opaque: Callable[[ast.Call], bool] | None = None) -> ast.AST | None:
    """The part of ``value`` bound to ``name`` in ``a, b = value``."""
    if index is None:
        return value
    if isinstance(value, (ast.Tuple, ast.List)):
        return value.elts[index] if index < len(value.elts) else None
    if opaque is not None and isinstance(value, ast.Call) and opaque(value):
        return value  # ``rgb, depth, acc = evaluator.create_samples(...)``
    if isinstance(value, ast.Call) and is_source_call(value):
        # ``loss, logs = compute_loss(...)``: only the loss-named parts are tensors, unless
        # the model outputs come back too (Hugging Face ``return_outputs=True``).
        words = tokens(last_name(value.func))
        if is_const(keyword(value, "return_outputs"), True):
            return value
        if words and words[-1] in ("loss", "criterion", "entropy", "kl"):
            return value if "loss" in tokens(name) else None
        return value
    return None


def _is_killer(value: ast.AST) -> bool:
    if isinstance(value, ast.Call):
        name = last_name(value.func)
        return name in _KILL_METHODS or (isinstance(value.func, ast.Name)
                                         and name in _KILL_FUNCS)
    return isinstance(value, (ast.Constant, ast.JoinedStr, ast.Compare))


def _isinstance_tensor(test: ast.AST) -> frozenset[str]:
    """Names known *not* to be tensors in the else-branch of ``isinstance(x, Tensor)``."""
    if (isinstance(test, ast.Call) and last_name(test.func) == "isinstance"
            and len(test.args) == 2 and isinstance(test.args[0], ast.Name)
            and "Tensor" in dotted(test.args[1])):
        return frozenset({test.args[0].id})
    return frozenset()
