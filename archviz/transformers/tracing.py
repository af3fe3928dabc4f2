"""The shape trace: a prefill and a decode forward pass of a model on meta tensors, every module's output recorded.

What the meta stage (``archviz.transformers.module_tree``) and the shape leg (``archviz.verify.shapecheck``) read shapes
from. Hooks record each module's output shapes, and in the prefill pass which earlier module outputs each module read
(``archviz.transformers.flowtrace``); a module whose code cannot run on meta tensors (an operator with no meta kernel, a
value read off a tensor) is replaced by a stand-in returning zeros shaped like its input, and everything recorded after
it is marked as downstream of it; any other exception stops the pass and is reported with the innermost module running.
Imports torch and transformers inside functions only, like ``archviz.transformers.meta``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, NamedTuple

from archviz.code.modeltree import Shape, ShapeTrace, TraceNote
from archviz.common.errors import raised_in_archviz
from archviz.transformers import internals
from archviz.transformers.flowtrace import FlowRecorder, raised_by_operation, tensors

if TYPE_CHECKING:
    import torch
    from torch import nn
    from transformers import PreTrainedModel


def trace_shapes(
    module: nn.Module,
    *,
    batch: int = 2,
    prefill: int = 5,
    past: int = 3,
    experts_implementation: str | None = "batched_mm",
    skip_repeats: bool = False,
    record_flow: bool = False,
) -> ShapeTrace:
    """Run a prefill and a decode forward pass on meta tensors and record every module's output shapes.

    Prefill feeds ``input_ids`` of shape ``(batch, prefill)``. Decode first fills a cache with ``past``
    positions (that pass is not recorded), then feeds ``(batch, 1)``. ``experts_implementation`` is the
    transformers experts kernel switched to for the passes and switched back afterwards: ``grouped_mm``
    and ``batched_mm`` run on meta tensors, the eager loop does not (it calls ``nonzero``). ``None``
    leaves the model as built. A module whose code cannot run on meta tensors (an operator with no meta kernel, a
    value read off a tensor) is replaced by a stand-in returning zeros shaped like its input, and reported in
    ``not_executed``; every output recorded after a stand-in ran is listed in ``downstream``. Any other exception
    stops the pass and is reported in ``errors`` with the innermost module that was running.

    ``skip_repeats`` passes the hidden state through an item of a ``ModuleList`` unchanged when an earlier item of
    the same list has the same structure and returned one tensor shaped like its input (a decoder layer): every kind
    of layer is traced once, at its first occurrence, and a 60-layer model costs a few layers. Only the first
    instance of each repeated module is then recorded.

    ``record_flow`` also records the prefill pass's data flow (``ShapeTrace.calls``,
    ``archviz.transformers.flowtrace``): what a graph read off the code draws its edges from.
    """
    for name, value, least in (("batch", batch, 1), ("prefill", prefill, 1), ("past", past, 1)):
        if value < least:
            raise ValueError(f"trace_shapes: {name} must be at least {least}, got {value}")
    tracer = _Tracer(module, skip_repeats=skip_repeats, record_flow=record_flow)
    with (
        tracer.attached(),
        eval_mode(module),
        # Hide transformers' advice about faster kernels: on meta tensors the reference code is what we want.
        internals.errors_only_logging(),
        internals.traced_inputs_on_meta(),
        experts_kernel(module, experts_implementation) as used,
    ):
        prefill_logits, decode_logits = tracer.run_passes(batch=batch, prefill=prefill, past=past)
    return ShapeTrace(
        batch_size=batch,
        prefill_tokens=prefill,
        past_tokens=past,
        experts_implementation=used,
        prefill=tracer.shapes["prefill"],
        decode=tracer.shapes["decode"],
        prefill_logits=prefill_logits,
        decode_logits=decode_logits,
        not_executed=tuple(tracer.not_executed.values()),
        errors=tuple(tracer.errors),
        downstream=tracer.downstream,
        decode_skipped=tracer.decode_skipped,
        repeats={tracer.paths[item]: tracer.paths[first] for item, first in tracer.repeats.items()},
        calls=tuple(tracer.flow.calls) if tracer.flow is not None and not tracer.errors_in("prefill") else (),
    )


@contextmanager
def eval_mode(module: nn.Module) -> Iterator[None]:
    """Inference behaviour (no dropout, no router jitter) for the duration; each module's mode restored."""
    modes = {sub: sub.training for sub in module.modules()}
    module.eval()
    try:
        yield
    finally:
        for sub, training in modes.items():
            sub.training = training


@contextmanager
def experts_kernel(module: nn.Module, wanted: str | None) -> Iterator[str | None]:
    """Switch the model's experts kernel for the duration, and back; yields the one in use. A wrapper that cannot
    switch (Kimi-K2.5's) has its models that can switched instead (its language model)."""
    switched = _switchable(module) if wanted is not None else []
    if wanted is None or not switched:
        yield None
        return
    originals = [(part, internals.experts_implementation(part)) for part in switched]
    for part in switched:
        internals.set_experts_implementation(part, wanted)
    try:
        # transformers may adjust the request (to what this torch supports): report what is in force.
        yield internals.experts_implementation(switched[0])[""]
    finally:
        for part, original in originals:
            internals.set_experts_implementation(part, original)


def _switchable(module: nn.Module) -> list[PreTrainedModel]:
    """The model itself when its experts kernel can be switched, else the outermost models inside it that can."""
    from transformers import PreTrainedModel

    if isinstance(module, PreTrainedModel) and internals.has_switchable_experts(module):
        return [module]
    found: list[PreTrainedModel] = []
    for child in module.children():
        found += _switchable(child)
    return found


class _Tracer:
    """Forward hooks recording output shapes, and stand-ins for modules that cannot run on meta."""

    def __init__(self, root: nn.Module, *, skip_repeats: bool = False, record_flow: bool = False) -> None:
        self.root = root
        self.repeats = _repeats(root) if skip_repeats else {}
        """Items of a module list -> the earlier item of the same structure that stands for them."""
        self.returned: dict[str, _Returned | None] = {}
        """Path of each representative -> what it last returned, when an item it stands for can be passed through
        (``_passable``)."""
        self.representatives = {id(representative) for representative in self.repeats.values()}
        self.paths = {sub: name for name, sub in root.named_modules()}
        self.phase = "prefill"
        self.recording = True
        self.shapes: dict[str, dict[str, tuple[Shape, ...]]] = {"prefill": {}, "decode": {}}
        self.downstream: dict[str, dict[str, str]] = {"prefill": {}, "decode": {}}
        self.stand_in_ran: str | None = None
        """The first stand-in that ran in the current pass (for decode, since the cache-filling pass)."""
        self.not_executed: dict[tuple[str, str], TraceNote] = {}
        self.errors: list[TraceNote] = []
        self.decode_skipped: str | None = None
        self.stack: list[str] = []
        self.stubbed_classes: set[type] = set()
        self.replaced: list[nn.Module] = []
        """Modules whose forward is replaced for the duration (stand-ins, skipped repeats)."""
        self.flow = FlowRecorder(root) if record_flow else None
        """The prefill pass's data flow, when asked for."""

    @contextmanager
    def attached(self) -> Iterator[None]:
        handles = []
        for sub, path in self.paths.items():
            handles.append(sub.register_forward_pre_hook(self._enter(path), with_kwargs=True))
            handles.append(sub.register_forward_hook(self._leave(path)))
        for item, representative in self.repeats.items():
            item.forward = self._pass_through(item, self.paths[representative])
            self.replaced.append(item)
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()
            for sub in self.replaced:
                vars(sub).pop("forward", None)

    def _enter(self, path: str) -> Callable[..., None]:
        def hook(_module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            self.stack.append(path)
            if self.flow is not None and self._recording_flow():
                self.flow.enter(path, args, kwargs)

        return hook

    def _leave(self, path: str) -> Callable[..., None]:
        def hook(module: nn.Module, _args: Any, output: Any) -> None:
            # Truncate back to this module even if an inner module raised and something caught it.
            if path in self.stack:
                del self.stack[len(self.stack) - 1 - self.stack[::-1].index(path) :]
            if self.flow is not None and self._recording_flow():
                self.flow.leave(path, output)
            shapes = tuple(_output_shapes(output))
            if id(module) in self.representatives:
                self.returned[path] = _passable(output)
            if self.recording and path not in self.shapes[self.phase]:
                self.shapes[self.phase][path] = shapes
                if self.stand_in_ran is not None:
                    self.downstream[self.phase][path] = self.stand_in_ran

        return hook

    def errors_in(self, phase: str) -> bool:
        """Whether the pass ``phase`` raised."""
        return any(note.phase == phase for note in self.errors)

    def _recording_flow(self) -> bool:
        """Whether the data flow is recorded now: in the prefill pass only."""
        return self.phase == "prefill" and self.recording

    def run_passes(self, *, batch: int, prefill: int, past: int) -> tuple[Shape | None, Shape | None]:
        import torch

        device = next((p.device for p in self.root.parameters()), torch.device("meta"))
        forward_parameters = inspect.signature(self.root.forward).parameters
        cache_argument = next((n for n in ("cache", "past_key_values") if n in forward_parameters), None)
        takes_keywords = any(item.kind is item.VAR_KEYWORD for item in forward_parameters.values())
        asks = "use_cache" in forward_parameters or (cache_argument is not None and takes_keywords)
        extra: dict[str, Any] = {"use_cache": True} if asks else {}
        # An encoder-decoder's forward needs the decoder's tokens too; its decode step is not traced.
        decoder = "decoder_input_ids" in forward_parameters

        def tokens(length: int) -> torch.Tensor:
            return torch.zeros((batch, length), dtype=torch.long, device=device)

        def inputs(length: int) -> dict[str, Any]:
            given = {"input_ids": tokens(length), **extra}
            return {**given, "decoder_input_ids": tokens(length)} if decoder else given

        with torch.no_grad():
            self.phase = "prefill"
            with self.flow.mode() if self.flow is not None else nullcontext():
                prefill_output = self._run("prefill", lambda: self.root(**inputs(prefill)))
            prefill_logits = _logits_shape(prefill_output)
            name = type(self.root).__name__
            if decoder:
                self.decode_skipped = f"{name} is an encoder-decoder model: its decode step is not traced"
                return prefill_logits, None
            if cache_argument is None or not extra:
                self.decode_skipped = f"{name}.forward takes no cache: there is no decode step"
                return prefill_logits, None
            if prefill_output is None:
                return prefill_logits, None
            self.phase = "decode"
            self.recording = False
            filled = self._run("decode", lambda: self.root(**inputs(past)))
            self.recording = True
            cache = _cache_of(filled)
            if cache is None:
                if filled is not None:  # it ran and kept nothing (BERT takes use_cache and builds no cache)
                    self.decode_skipped = f"{name}'s forward returned no cache: there is no decode step"
                return prefill_logits, None
            decode_output = self._run("decode", lambda: self.root(**inputs(1), **{cache_argument: cache}))
            return prefill_logits, _logits_shape(decode_output)

    def _run(self, phase: str, call: Callable[[], Any]) -> Any:
        """Run ``call``; where a module cannot run on meta tensors, stand in for its class and retry; on any other
        failure record it (with the innermost module running) and give up the pass."""
        # A stand-in that ran while the cache was filled has made up the cache the decode step reads.
        carried = self.stand_in_ran if phase == "decode" and self.recording else None
        while True:
            self.stack.clear()
            self.stand_in_ran = carried
            if self.recording:
                self.shapes[phase].clear()
                self.downstream[phase].clear()
            if phase == "prefill" and self.flow is not None:
                self.flow.clear()
            try:
                return call()
            except Exception as exc:  # any failure inside modeling code is reported, never raised
                failing = self.stack[-1] if self.stack else ""
                message = f"{type(exc).__name__}: {first_line(exc)}"
                internal = raised_in_archviz(exc) and not raised_by_operation(exc)
                if internal or not _cannot_run_on_meta(exc) or not self._stand_in_for(failing, message):
                    self.errors.append(TraceNote(phase=phase, module=failing, message=message, internal=internal))
                    return None

    def _stand_in_for(self, path: str, message: str) -> bool:
        """Replace every module of the failing module's class by a zeros stand-in; False if not sensible."""
        from transformers import PreTrainedModel

        failing = self.root.get_submodule(path)
        if path == "" or isinstance(failing, PreTrainedModel) or type(failing) in self.stubbed_classes:
            return False
        self.stubbed_classes.add(type(failing))
        for sub, sub_path in self.paths.items():
            if type(sub) is type(failing):
                sub.forward = self._zeros_like_input(sub_path, message, sub)
                self.replaced.append(sub)
        return True

    def _pass_through(self, item: nn.Module, representative: str) -> Callable[..., Any]:
        """``item``'s forward, or its input hidden state unchanged when its representative returned one tensor shaped
        like that input (it is shape-preserving: what ``item`` computes has the same shape). A representative that
        returned a tuple led by such a tensor (MistralLarge4's decoder layer returns its hidden state and the top-k
        indices the next layer reads) is passed through likewise: the input, then new tensors shaped as the
        representative's others (this item's own outputs, not the representative's) and its Nones."""
        import torch

        forward = item.forward

        def skipped(*args: Any, **kwargs: Any) -> Any:
            first = next((v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)), None)
            if first is None:
                return forward(*args, **kwargs)
            returned = self.returned.get(representative)
            if returned is None or returned.shape != tuple(first.shape):
                return forward(*args, **kwargs)
            if returned.others is None:
                return first
            return (
                first,
                *(
                    None if held is None else torch.empty(held[0], dtype=held[1], device=held[2])
                    for held in returned.others
                ),
            )

        return skipped

    def _zeros_like_input(self, path: str, message: str, module: nn.Module) -> Callable[..., torch.Tensor]:
        import torch

        def stand_in(*args: Any, **kwargs: Any) -> torch.Tensor:
            first = next((v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)), None)
            if first is None:
                raise RuntimeError("no tensor input to shape a stand-in output like")
            _run_children_reading(module, first)
            if self.stand_in_ran is None:
                self.stand_in_ran = path
            key = (self.phase, path)
            if key not in self.not_executed:
                self.not_executed[key] = TraceNote(
                    phase=self.phase,
                    module=path,
                    message=f"cannot run on meta tensors ({message}); replaced by zeros like its input",
                )
            return torch.zeros_like(first)

        return stand_in


def _run_children_reading(module: nn.Module, hidden: torch.Tensor) -> None:
    """Run on ``hidden`` each child of a stood-in module whose first matrix reads vectors of its width (a MoE's router
    and shared experts, beside experts whose dispatch needs real data), so that their shapes and the flow into them are
    recorded. A list of modules is not run (its items take what the module routes to them); a child that fails is left
    unrecorded, as the module's own code would have run it on other inputs."""
    from torch import nn

    for child in module.children():
        if isinstance(child, nn.ModuleList | nn.ModuleDict):
            continue
        matrix = next((p for p in child.parameters() if p.dim() == 2), None)
        if matrix is None or matrix.shape[-1] != hidden.shape[-1]:
            continue
        try:
            child(hidden)
        except Exception:  # the child takes other inputs in the module's own code: its shapes stay unknown
            continue


def _repeats(root: nn.Module) -> dict[nn.Module, nn.Module]:
    """Items of every ``ModuleList`` that an earlier item of the same list matches in class, parameters (names,
    shapes, dtypes) and sub-module classes: item -> the first item of that structure."""
    from torch import nn

    found: dict[nn.Module, nn.Module] = {}
    for module in root.modules():
        if not isinstance(module, nn.ModuleList):
            continue
        first: dict[tuple[Any, ...], nn.Module] = {}
        for item in module:
            signature = (
                type(item),
                tuple((name, tuple(p.shape), p.dtype) for name, p in item.named_parameters()),
                tuple((name, type(sub)) for name, sub in item.named_modules()),
            )
            if signature in first:
                found[item] = first[signature]
            else:
                first[signature] = item
    return found


def _shape(tensor: torch.Tensor) -> Shape:
    return tuple(int(size) for size in tensor.shape)


class _Returned(NamedTuple):
    """What a representative returned, as far as passing an item of its structure through needs it."""

    shape: Shape
    """The shape of the tensor it returned, or of the first of the tuple it returned."""
    others: tuple[tuple[Shape, Any, Any] | None, ...] | None
    """The rest of that tuple, each tensor's shape, dtype and device, or None; None when it returned one tensor."""


def _passable(output: Any) -> _Returned | None:
    """``output`` as ``_Returned`` when it is one tensor, or a plain tuple of tensors and Nones led by a tensor; else
    None (the item is run)."""
    import torch

    if isinstance(output, torch.Tensor):
        return _Returned(_shape(output), None)
    if type(output) is not tuple or not output or not isinstance(output[0], torch.Tensor):
        return None
    if not all(value is None or isinstance(value, torch.Tensor) for value in output):
        return None
    others = tuple(None if value is None else (_shape(value), value.dtype, value.device) for value in output[1:])
    return _Returned(_shape(output[0]), others)


def _cannot_run_on_meta(exc: BaseException) -> bool:
    """Whether ``exc`` says the code needs real data (no meta kernel, ``.item()``, ``nonzero``), rather than that it
    fails: only then does a stand-in make sense."""
    return isinstance(exc, NotImplementedError) or "meta" in str(exc).lower()


def _output_shapes(output: Any) -> Iterator[Shape]:
    """Shapes of the tensors in a module output, depth first (ModelOutput, tuples, dicts); caches skipped."""
    return (_shape(tensor) for tensor in tensors(output))


def _logits_shape(output: Any) -> Shape | None:
    import torch

    logits = output.get("logits") if isinstance(output, Mapping) else None
    if logits is None and isinstance(output, tuple) and output:
        logits = output[0]
    return _shape(logits) if isinstance(logits, torch.Tensor) else None


def _cache_of(output: Any) -> Any:
    if not isinstance(output, Mapping):
        return None
    for key in ("cache", "past_key_values"):
        if (cache := output.get(key)) is not None:
            return cache
    return None


def first_line(exc: BaseException) -> str:
    """The message on one line: its first line, with the lines after it while each ends in a colon (pydantic-style
    validators say what failed on the line after ``… validator 'validate_layer_type':``)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    said = [lines[0]]
    for line in lines[1:]:
        if not said[-1].endswith(":"):
            break
        said.append(line)
    return " ".join(said)
