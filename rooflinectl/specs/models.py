"""Where a model comes from: the bundled catalog (``workloads/models/*.yaml``, and the folders of
``ROOFLINECTL_WORKLOADS_PATH`` before it), a model YAML path, or a local Hugging Face ``config.json`` (nothing is
downloaded; :mod:`specs.hf.config` reads its keys). The architecture is :mod:`specs.model`'s."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError, closest
from ..files import user_path
from .hf.config import HF_KEY_OF_FIELD, model_fields
from .load import looks_like_path, read_json, read_yaml, search_dirs, validate
from .model import Model

WORKLOADS_PATH_ENV = "ROOFLINECTL_WORKLOADS_PATH"

__all__ = ["WORKLOADS_PATH_ENV", "list_models", "load_model", "model_catalog", "model_from_hf_config"]


def model_catalog() -> dict[str, Path]:
    names: dict[str, Path] = {}
    for folder in reversed(search_dirs("workloads", WORKLOADS_PATH_ENV)):
        models = folder / "models"
        if models.is_dir():
            for path in sorted(models.glob("*.y*ml")):
                names[path.stem.lower()] = path
    return names


def list_models() -> list[Model]:
    return [load_model(str(p)) for p in model_catalog().values()]


def model_from_hf_config(path: Path) -> Model:
    """A Model from a Hugging Face ``config.json`` (the keys and refusals: :mod:`specs.hf.config`)."""
    return validate(Model, model_fields(read_json(path), path), str(path), HF_KEY_OF_FIELD)


def load_model(name: str) -> Model:
    """A model by id (``workloads/models/<id>.yaml``), model YAML path, or Hugging Face config.json path."""
    if looks_like_path(name):
        path = user_path(name)
        if path.suffix == ".json":
            return model_from_hf_config(path)
        return validate(Model, read_yaml(path), str(path))
    catalog = model_catalog()
    found = catalog.get(name.lower())
    if found is None:
        raise UserError(f"unknown model '{name}'{closest(name, catalog)}; 'rooflinectl workloads list' shows them all")
    return validate(Model, read_yaml(found), str(found))
