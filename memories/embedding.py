"""Sentence embeddings for semantic search, computed in-process with no network at run time.

`SEARCH_EMBEDDER` names the model:
- `wordllama` (default): WordLlama's 256-dimension `l2_supercat` model, whose weights and
  tokenizer ship inside the pinned `wordllama` wheel, so a fresh install works offline;
- `sentence-transformers:<folder>` or `fastembed:<folder>`: a model an operator keeps on local
  disk, through the optional extra of the same name (`pip install -e .[sentence-transformers]`);
- `none`: no embeddings; search ranks by words only.

Whatever the model, vectors are cut or zero-padded to the column's `EMBEDDING_DIMENSIONS` and
scaled to unit length, so cosine distance is comparable across memories. Changing the model
leaves old vectors in another space: the table records which model made its vectors
(`StoredVectors`), a question's vector is compared only with its own model's
(`comparable_with`), and `manage.py embed_memories --reembed` rewrites them all.
The model is loaded once per process (the ASGI application loads it at start-up).
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Protocol

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

EMBEDDING_DIMENSIONS = 256
# What of a memory is embedded: enough for its meaning; a long tail adds little and costs time.
EMBEDDED_CHARACTERS_MAX = 2_000


class Embedder(Protocol):
    name: str

    def embed(self, texts: list[str]) -> np.ndarray:
        """One row per text, `EMBEDDING_DIMENSIONS` wide, unit length (or all zeros)."""
        ...


def _fit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    width = vectors.shape[1]
    if width > EMBEDDING_DIMENSIONS:
        vectors = vectors[:, :EMBEDDING_DIMENSIONS]
    elif width < EMBEDDING_DIMENSIONS:
        vectors = np.pad(vectors, ((0, 0), (0, EMBEDDING_DIMENSIONS - width)))
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


class WordLlamaEmbedder:
    name = "wordllama"

    def __init__(self) -> None:
        import wordllama

        # The wheel keeps its files in `weights/` and `tokenizers/` under the package; pointing
        # the cache there makes the loader find them instead of trying a download.
        self._model = wordllama.WordLlama.load(
            cache_dir=Path(wordllama.__file__).parent, disable_download=True
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        return _fit(self._model.embed(texts, norm=True))


def _optional(module: str, extra: str):
    """The module of an optional extra, or a configuration error saying how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as missing:
        raise ImproperlyConfigured(
            f"SEARCH_EMBEDDER names {extra}, which is not installed: pip install -e .[{extra}]"
        ) from missing


class SentenceTransformersEmbedder:
    def __init__(self, folder: str) -> None:
        self.name = f"sentence-transformers:{folder}"
        library = _optional("sentence_transformers", "sentence-transformers")
        self._model = library.SentenceTransformer(folder, device="cpu", local_files_only=True)

    def embed(self, texts: list[str]) -> np.ndarray:
        return _fit(self._model.encode(texts, normalize_embeddings=True))


class FastEmbedEmbedder:
    def __init__(self, folder: str) -> None:
        self.name = f"fastembed:{folder}"
        library = _optional("fastembed", "fastembed")
        # FastEmbed describes a folder by its model_name (file names, pooling): its default,
        # BAAI/bge-small-en-v1.5, whose files the folder must hold (docs/operations.md).
        self._model = library.TextEmbedding(specific_model_path=folder, local_files_only=True)

    def embed(self, texts: list[str]) -> np.ndarray:
        return _fit(np.array(list(self._model.embed(texts))))


def load_embedder(spec: str) -> Embedder | None:
    """The embedder a `SEARCH_EMBEDDER` value names, loaded; None for `none`."""
    if spec == "none":
        return None
    kind, _, folder = spec.partition(":")
    if kind == "wordllama" and not folder:
        return WordLlamaEmbedder()
    if kind == "sentence-transformers" and folder:
        return SentenceTransformersEmbedder(folder)
    if kind == "fastembed" and folder:
        return FastEmbedEmbedder(folder)
    raise ImproperlyConfigured(
        f"SEARCH_EMBEDDER={spec!r}: expected wordllama, none, "
        "sentence-transformers:<model folder> or fastembed:<model folder>"
    )


@functools.cache
def _embedder_for(spec: str) -> Embedder | None:
    return load_embedder(spec)


def get_embedder() -> Embedder | None:
    """The process's embedder (loaded on first use, then kept), or None when search is
    lexical only."""
    return _embedder_for(settings.SEARCH_EMBEDDER)


def memory_text(*, topic: str, content: str, tags: list[str], project: str | None) -> str:
    """The text of a memory that its vector stands for."""
    parts = [topic, content[:EMBEDDED_CHARACTERS_MAX], " ".join(tags), project or ""]
    return "\n".join(part for part in parts if part)


def embed_memories(texts: list[str]) -> list[np.ndarray | None]:
    """A vector per memory text, or None each when no embedder is configured."""
    embedder = get_embedder()
    if embedder is None or not texts:
        return [None] * len(texts)
    return list(embedder.embed(texts))


def storable_with(stored_by: str | None) -> bool:
    """Whether this process's memory vectors may join the stored ones, which the embedder
    `stored_by` made (None: not known, taken to be this process's). A vector of another model
    would be compared with them as if it were theirs, and no fill replaces a vector: the memory
    is stored without one, which `embed_memories` gives it with the table's model."""
    embedder = get_embedder()
    return embedder is None or stored_by in (None, embedder.name)


def comparable_with(stored_by: str | None) -> bool:
    """Whether this process's question vectors may be compared with the stored ones, which the
    embedder `stored_by` made (None: not known, taken to be this process's). Otherwise search
    ranks by words only, and says why in the log once per process."""
    embedder = get_embedder()
    if embedder is None:
        return False
    if stored_by in (None, embedder.name):
        return True
    _warn_incomparable(stored_by, embedder.name)
    return False


@functools.cache
def _warn_incomparable(stored_by: str, running: str) -> None:
    logger.warning(
        "search ranks by words only: the stored vectors were made by %s, SEARCH_EMBEDDER is %s; "
        "run manage.py embed_memories --reembed",
        stored_by,
        running,
    )


def embed_query(text: str) -> np.ndarray | None:
    embedder = get_embedder()
    if embedder is None:
        return None
    vector = embedder.embed([text])[0]
    return vector if vector.any() else None
