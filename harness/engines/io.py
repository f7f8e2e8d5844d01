"""What the subprocess engines (burn_engine, copy_engine) share: choosing a backend by name and
emitting one JSON object per line on stdout."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

B = TypeVar("B")


def choose_backend(name: str, gpu: Sequence[type[B]], host: Callable[[], B]) -> B:
    """`numpy`: the host backend; `auto`: the first of `gpu` (PyTorch, CuPy) that imports (never
    the host); else the GPU backend class whose `name` is `name`. Raises ImportError."""
    if name == "numpy":
        return host()
    tried = []
    for cls in (gpu if name == "auto" else [c for c in gpu if getattr(c, "name", "") == name]):
        try:
            return cls()
        except ImportError as e:
            tried.append(f"{getattr(cls, 'name', cls.__name__)}: {e}")
    raise ImportError("no GPU backend importable (" + "; ".join(tried) + "); pip install torch or cupy")


def emit(obj: dict[str, Any]) -> None:
    """One event as a JSON line, flushed at once (the parent reads it even if we die next)."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
