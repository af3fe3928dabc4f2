"""The data flow of the traced prefill pass: which earlier module outputs each module call's tensor inputs derive from.

A ``torch.overrides.TorchFunctionMode`` sees every torch operation the modeling code runs and gives each tensor it
produces the origins of the tensors it was computed from; a module's forward hook makes the module's returned
tensors its own output, so an origin is always the nearest recorded call: a module call, a model input, or a use of
a module's parameters by code other than that module's own leaf forward (``CallKind.PARAMETERS``). Parameter-free
operations (views, reshapes, arithmetic, activations, attention's math, rotary, concatenation, masking) pass origins
on; an in-place operation adds them to the tensor it writes and to the tensor that tensor is a view of. An addition
inside an item of a ``ModuleList`` (a decoder layer) whose one operand descends from the item's input (its first
tensor argument, ``hidden_states``) and whose other does not is the residual connection: the first operand's origins
are marked residual. Tensors are keyed weakly by identity, so memory is what the pass keeps alive anyway, and the
record is cleared with each retried pass.

Imports torch inside functions only, like ``archviz.transformers.tracing``, which runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from archviz.code.modeltree import CallKind, Shape, TracedCall, TracedRead

if TYPE_CHECKING:
    import torch
    from torch import nn
    from torch.overrides import TorchFunctionMode

ADDITIONS = frozenset({"add", "add_", "__add__", "__radd__", "__iadd__"})
"""torch's spellings of an addition (``torch.add``, ``a + b``, ``a += b``): where a residual connection is made."""


def shape_only(name: str) -> bool:
    """Whether an operation reads its tensor arguments for their shape, dtype and device alone (``zeros_like``,
    ``new_zeros``, ``new_empty``): its result holds none of their values."""
    return name.endswith("_like") or name.startswith("new_")


IN_PLACE_OPERATORS = frozenset(
    {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__"}
    | {"__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__"}
)
"""Operators that write into their first operand (``x[i] = y``, ``x *= y``), besides methods ending in ``_``."""


@dataclass(frozen=True, slots=True)
class _Origins:
    """Where one tensor's values come from: recorded calls (-> whether through a residual operand), and modules whose
    parameters it holds that have not yet met data (``self.A_log.float().exp()``)."""

    sources: Mapping[tuple[int, int], bool]
    """(call, which of its returned tensors) -> whether through a residual operand."""
    pending: frozenset[str] = frozenset()


_NONE = _Origins(sources={})


@dataclass(slots=True)
class _Frame:
    """A module call in progress."""

    path: str
    call: int
    inputs: frozenset[int]
    """``id`` of each tensor it was given: one it returns unchanged stays the giver's."""
    block: frozenset[tuple[int, int]] | None
    """For an item of a ``ModuleList``, the sources of its first tensor argument, the stream it adds to (what a
    residual operand descends from)."""


class FlowRecorder:
    """Records the data flow of one pass (``ShapeTrace.calls``): module hooks call ``enter`` and ``leave``, the
    function mode from ``mode`` calls ``operation``."""

    def __init__(self, root: nn.Module) -> None:
        from torch import nn
        from torch.utils.weak import WeakIdKeyDictionary

        self.owners: dict[int, str] = {}
        """``id`` of every parameter and saved buffer -> the path of the first module holding it."""
        self.own: dict[int, frozenset[str]] = {}
        """``id`` of every parameter and saved buffer -> the paths of every module holding it (tied weights)."""
        self.containers: set[str] = set()
        """Paths of modules whose children hold parameters: their own parameters are used beside their children's."""
        self.items: set[str] = set()
        """Paths of the items of every ``ModuleList`` (the repeated blocks)."""
        holders: dict[int, list[str]] = {}
        for path, module in root.named_modules():
            skipped: set[str] = getattr(module, "_non_persistent_buffers_set", set())
            held = [*module.parameters(recurse=False)]
            held += [buffer for name, buffer in module.named_buffers(recurse=False) if name not in skipped]
            for tensor in held:
                holders.setdefault(id(tensor), []).append(path)
            if any(True for child in module.children() for _ in child.parameters()):
                self.containers.add(path)
            if isinstance(module, nn.ModuleList):
                prefix = f"{path}." if path else ""
                self.items.update(prefix + name for name, _ in module.named_children())
        self.owners = {key: paths[0] for key, paths in holders.items()}
        self.own = {key: frozenset(paths) for key, paths in holders.items()}
        self.origins: Any = WeakIdKeyDictionary()
        self.calls: list[TracedCall] = []
        self.frames: list[_Frame] = []

    def clear(self) -> None:
        """Forget everything recorded (a pass that is run again)."""
        self.origins.clear()
        self.calls.clear()
        self.frames.clear()

    # -- module boundaries

    def enter(self, path: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """A module's forward begins: a call reading its tensor arguments (the model's own arguments become inputs)."""
        if not self.frames and path == "":
            self._label_inputs(args, kwargs)
        given = [*tensors(args), *tensors(kwargs)]
        call = self._call(path, CallKind.MODULE, self._reads(given))
        # A block's residual stream is its first tensor argument (``hidden_states``), not the position embeddings or
        # the mask it is also given.
        block = frozenset(self._of(given[0]).sources) if path in self.items and given else None
        self.frames.append(_Frame(path=path, call=call, inputs=frozenset(map(id, given)), block=block))

    def leave(self, path: str, output: Any) -> None:
        """A module's forward returns: what it returned is its output (a tensor it was given stays the giver's)."""
        index = next((i for i in range(len(self.frames) - 1, -1, -1) if self.frames[i].path == path), None)
        if index is None:
            return
        frame = self.frames[index]
        del self.frames[index:]  # an inner module that raised and was caught left its frame
        returned = list(tensors(output))
        previous = self.calls[frame.call]
        self.calls[frame.call] = TracedCall(
            path=previous.path,
            kind=previous.kind,
            reads=previous.reads,
            returns=tuple(self._reads([tensor]) for tensor in returned),
        )
        for position, tensor in enumerate(returned):
            if id(tensor) not in frame.inputs:
                self.origins[tensor] = _Origins(sources={(frame.call, position): False})

    def _label_inputs(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        named = [("input", value) for value in args] + list(kwargs.items())
        for name, value in named:
            for tensor in tensors(value):
                self.origins[tensor] = _Origins(sources={(self._call(name, CallKind.INPUT, ()), 0): False})

    def _call(self, path: str, kind: CallKind, reads: tuple[TracedRead, ...]) -> int:
        self.calls.append(TracedCall(path=path, kind=kind, reads=reads))
        return len(self.calls) - 1

    def _reads(self, tensors: list[torch.Tensor]) -> tuple[TracedRead, ...]:
        """One read per (source, residual) of the tensors' origins, in order, with the first such tensor's shape."""
        reads: dict[tuple[int, int, bool], TracedRead] = {}
        for tensor in tensors:
            shape: Shape = tuple(int(size) for size in tensor.shape)
            for (source, output), residual in self._of(tensor).sources.items():
                reads.setdefault(
                    (source, output, residual),
                    TracedRead(source=source, output=output, shape=shape, residual=residual),
                )
        return tuple(reads.values())

    # -- operations

    def operation(
        self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any], result: Any
    ) -> None:
        """A torch operation ran: its results (and the tensor it wrote in place) derive from its tensor inputs."""
        name = getattr(func, "__name__", "")
        given = [*tensors(args), *tensors(kwargs)]
        if not given or shape_only(name):
            return
        operands = [self._operand(tensor) for tensor in given]
        if name in ADDITIONS and len(args) >= 2 and len(given) >= 2:
            operands[:2] = self._residual(operands[0], operands[1])
        origins = self._combine(operands, given)
        written = _written(name, args, kwargs)
        if written is not None:
            if name == "copy_":  # overwrites: the written tensor's old values are gone
                origins = self._combine(operands[1:], given[1:])
            self._write(written, origins)
        for tensor in tensors(result):
            if id(tensor) not in self.owners:
                self.origins[tensor] = origins

    def _of(self, tensor: torch.Tensor) -> _Origins:
        found: _Origins | None = self.origins.get(tensor)
        return found if found is not None else _NONE

    def _operand(self, tensor: torch.Tensor) -> _Origins:
        """A tensor's origins; a parameter's are its module's, pending, unless that module's own leaf forward is
        running (``Linear``'s weight inside ``Linear.forward`` is the module's own business)."""
        key = id(tensor)
        if key not in self.owners:
            return self._of(tensor)
        current = self.frames[-1].path if self.frames else None
        if current in self.own[key] and current not in self.containers:
            return _NONE
        return _Origins(sources={}, pending=frozenset({self.owners[key]}))

    def _residual(self, left: _Origins, right: _Origins) -> tuple[_Origins, _Origins]:
        """The two operands of an addition, the one that descends from the enclosing block's input marked residual when
        the other does not."""
        block = next((frame.block for frame in reversed(self.frames) if frame.block is not None), None)
        if not block:
            return left, right
        descends = [bool(block.intersection(operand.sources)) for operand in (left, right)]
        if descends[0] == descends[1]:
            return left, right
        marked = [
            _Origins(sources=dict.fromkeys(operand.sources, True), pending=operand.pending) if flag else operand
            for operand, flag in zip((left, right), descends, strict=True)
        ]
        return marked[0], marked[1]

    def _combine(self, operands: list[_Origins], given: list[torch.Tensor]) -> _Origins:
        """The origins of a result. Parameters meeting data are a use of their module's parameters: a call reading
        the data, whose output the result is."""
        sources: dict[tuple[int, int], bool] = {}
        for operand in operands:
            for source, residual in operand.sources.items():
                sources[source] = sources.get(source, True) and residual
        pending = frozenset().union(*(operand.pending for operand in operands))
        if not pending or not sources:
            return _Origins(sources=sources, pending=pending)
        data = [tensor for tensor, operand in zip(given, operands, strict=True) if operand.sources]
        reads = self._reads(data)
        calls = [self._call(path, CallKind.PARAMETERS, reads) for path in sorted(pending)]
        return _Origins(sources={(call, 0): False for call in calls})

    def _write(self, tensor: torch.Tensor, origins: _Origins) -> None:
        """An in-place write: the tensor, and each tensor it is a view of, now hold values of these origins."""
        seen: torch.Tensor | None = tensor
        while seen is not None:
            if id(seen) in self.owners:
                return
            self.origins[seen] = origins if seen is tensor else self._merge(self._of(seen), origins)
            seen = seen._base

    @staticmethod
    def _merge(first: _Origins, second: _Origins) -> _Origins:
        sources = dict(first.sources)
        for source, residual in second.sources.items():
            sources[source] = sources.get(source, True) and residual
        return _Origins(sources=sources, pending=first.pending | second.pending)

    def mode(self) -> TorchFunctionMode:
        """A function mode that reports every torch operation to ``operation``; enter it around the pass."""
        from torch.overrides import TorchFunctionMode

        recorder = self

        class Recording(TorchFunctionMode):
            def __torch_function__(
                self,
                func: Callable[..., Any],
                types: Any,
                args: tuple[Any, ...] = (),
                kwargs: Mapping[str, Any] | None = None,
            ) -> Any:
                kwargs = kwargs or {}
                try:
                    result = func(*args, **kwargs)
                except Exception as exc:  # torch's (or the modeling code's), though this frame is innermost
                    exc.__dict__[RAISED_BY_OPERATION] = True
                    raise
                recorder.operation(func, args, kwargs, result)
                return result

        return Recording()


RAISED_BY_OPERATION = "archviz_raised_by_operation"
"""Set on an exception that a torch operation run through the recording mode raised: the mode's frame is then the
innermost Python frame of its traceback, though the failure is the operation's (``.cpu()`` of a meta tensor)."""


def raised_by_operation(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by a torch operation the recording mode passed on (not by the recorder itself)."""
    return bool(getattr(exc, "__dict__", {}).get(RAISED_BY_OPERATION))


def _written(name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """The tensor an operation writes in place (``x.add_(y)``, ``x[i] = y``, ``out=``), or None."""
    import torch

    out = kwargs.get("out")
    if isinstance(out, torch.Tensor):
        return out
    in_place = name in IN_PLACE_OPERATORS or (name.endswith("_") and not name.startswith("_"))
    if in_place and args and isinstance(args[0], torch.Tensor):
        return args[0]
    return None


def tensors(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in an argument or a result, depth first: itself, or inside tuples, lists and mappings (a
    ``ModelOutput``); anything else (a cache object) skipped."""
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from tensors(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from tensors(item)
