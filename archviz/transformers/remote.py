"""The config and model classes a model folder's own code names (``auto_map``), imported under the user's explicit
trust (``--trust-remote-code``) with the names older transformers had lent (``archviz.transformers.remote_compat``).

Imports transformers inside functions.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from archviz.common.errors import InputError
from archviz.inputs.recipe import ModelRecipe
from archviz.transformers import internals
from archviz.transformers.configs import transformers_config_class
from archviz.transformers.tracing import first_line

# auto_map entries tried, in order, for the model class when remote code is allowed.
_REMOTE_MODEL_AUTO_CLASSES = ("AutoModelForCausalLM", "AutoModel")


def remote_classes(auto_map: dict[str, Any], model_dir: Path, recipe: ModelRecipe, notes: list[str]) -> tuple[Any, Any]:
    """The config and model classes ``auto_map`` names in the model folder's own code (``None`` if not named).

    Only ever called with the user's explicit trust: this imports and runs the folder's .py files, unchanged, with the
    names older transformers releases had lent for the import (``archviz.transformers.remote_compat``). A config class
    named in a file the folder lacks (a release's ``configuration_deepseek.py`` not copied beside its modeling file) is
    transformers' own for the model_type the config is read as, standing in under the name the code imports; each such
    step is said in ``notes``.
    """
    from transformers import PretrainedConfig, PreTrainedModel

    from archviz.transformers.remote_compat import stand_in_config

    model_reference = next((auto_map[name] for name in _REMOTE_MODEL_AUTO_CLASSES if auto_map.get(name)), None)
    config_reference = auto_map.get("AutoConfig")
    stand_in = None
    if isinstance(config_reference, str) and not (model_dir / _module_file(config_reference)).is_file():
        stand_in = transformers_config_class(recipe.model_type, recipe.config_path)
        notes.append(
            f"auto_map names {config_reference}, whose file the model folder lacks: transformers' "
            f"{stand_in.__name__} (model_type {recipe.model_type!r}) stands in for it, keeping every key of the config "
            "as an attribute as the releases' own config classes do"
        )
    config_class, model_class = (stand_in_config(stand_in) if stand_in is not None else None), None
    with _importable_folder(model_dir, config_reference, stand_in) as folder:
        if stand_in is None and isinstance(config_reference, str):
            found = _import_remote_class(config_reference, folder, model_dir, recipe.config_path, notes)
            config_class = _subclass_of(PretrainedConfig, found, config_reference, recipe.config_path)
        if isinstance(model_reference, str):
            found = _import_remote_class(model_reference, folder, model_dir, recipe.config_path, notes)
            model_class = _subclass_of(PreTrainedModel, found, model_reference, recipe.config_path)
    return config_class, model_class


def _subclass_of(base: type, found: Any, reference: str, config_path: str) -> Any:
    """``found``, refused when it is not a subclass of transformers' ``base``."""
    if not (isinstance(found, type) and issubclass(found, base)):
        raise InputError(
            f"auto_map names {reference} in the model's own code, which is {_kind(found)}, not a subclass of "
            f"transformers' {base.__name__}",
            path=config_path,
        )
    return found


def _module_file(reference: str) -> str:
    """The file an ``auto_map`` reference's module is in (``configuration_deepseek.DeepseekV3Config`` ->
    ``configuration_deepseek.py``); a reference into another repo (``repo--module.Class``) by its module."""
    return f"{reference.split('--')[-1].rpartition('.')[0]}.py"


@contextmanager
def _importable_folder(model_dir: Path, config_reference: Any, stand_in: Any) -> Iterator[Path]:
    """The model folder, or (a config class standing in for a file it lacks) a copy of its .py files in a temporary
    folder of the same name, beside a module of that file's name that imports transformers' class under the name the
    code imports. The user's folder is never written to."""
    if stand_in is None or not isinstance(config_reference, str):
        yield model_dir
        return
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="archviz-remote-") as scratch:
        folder = Path(scratch) / model_dir.name
        folder.mkdir()
        for source in model_dir.glob("*.py"):
            shutil.copyfile(source, folder / source.name)
        name = config_reference.rpartition(".")[2]
        (folder / _module_file(config_reference)).write_text(
            f"# Written by archviz: {_module_file(config_reference)} is not in the model folder.\n"
            "from archviz.transformers.remote_compat import stand_in_config\n"
            f"from {stand_in.__module__} import {stand_in.__name__}\n\n"
            f"{name} = stand_in_config({stand_in.__name__})\n",
            encoding="utf-8",
        )
        yield folder


def _import_remote_class(reference: str, folder: Path, model_dir: Path, config_path: str, notes: list[str]) -> Any:
    """Import ``reference`` from ``folder`` with older transformers' names lent; what the code raises is its fault."""
    import transformers

    from archviz.transformers.remote_compat import COMPATIBILITY_NOTE, older_transformers_names

    try:
        with older_transformers_names() as lent:
            found = internals.class_from_model_code(reference, folder)
    except (Exception, SystemExit) as exc:  # importing runs the model's own code: what it raises is its fault
        raise InputError(
            f"cannot import {reference} from the model's own code in {model_dir}: {type(exc).__name__}: "
            f"{first_line(exc)}",
            path=config_path,
        ) from exc
    if lent:
        note = COMPATIBILITY_NOTE.format(version=f"transformers {transformers.__version__}", names=", ".join(lent))
        if note not in notes:
            notes.append(note)
    return found


def _kind(value: object) -> str:
    return f"the class {value.__name__}" if isinstance(value, type) else f"an object of type {type(value).__name__}"
