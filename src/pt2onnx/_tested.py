"""The releases CI tests pt2onnx with, and how an installed version compares with them
(``pt2onnx doctor``, the warning on an untested torch). Not a version difference:
those live in ``_compat.py``."""

from __future__ import annotations

# The combinations CI runs (docs/compatibility.md says the same); `pt2onnx doctor`
# compares the installed versions with these, by major.minor(.patch) prefix.
TESTED: dict[str, tuple[str, ...]] = {
    "torch": ("2.12.1", "2.13.0", "2.14.1", "2.15.0"),
    "onnx": ("1.23",),
    "onnx-ir": ("1.1",),
    "onnxruntime": ("1.31.1", "1.32.0"),
    "python": ("3.11",),
}


def is_tested(name: str, version: str) -> bool | None:
    """Whether ``version`` of ``name`` is in TESTED (None: no tested set for ``name``).

    A tested entry matches by whole components: "1.1" matches 1.1.0 and 1.1.3, not 1.10;
    a local build tag ("+cpu", "+cu130") is ignored.
    """
    tested = TESTED.get(name)
    if tested is None:
        return None
    parts = version.split("+")[0].split(".")
    return any(parts[: len(t.split("."))] == t.split(".") for t in tested)


def _release(version: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in version.split("+")[0].split("."))
    except ValueError:
        return None


def nearest_tested(name: str, version: str) -> str | None:
    """The tested version of ``name`` nearest to ``version``.

    Of the tested releases just below and just above ``version``, the one sharing more
    leading components with it (the lower one on a tie): 2.16.0 -> 2.15.0, 2.14.0 ->
    2.14.1, 2.13.5 -> 2.13.0, 3.0.0 -> 2.15.0. None when ``name`` has no tested set or
    ``version`` is not a release number.
    """
    release = _release(version)
    if release is None or name not in TESTED:
        return None
    tested = sorted(TESTED[name], key=lambda t: _release(t) or ())
    below = [t for t in tested if (_release(t) or ()) <= release]
    above = [t for t in tested if (_release(t) or ()) > release]
    neighbours = below[-1:] + above[:1]

    def shared(t: str) -> int:
        parts = _release(t) or ()
        return next((i for i, (a, b) in enumerate(zip(parts, release)) if a != b),
                    min(len(parts), len(release)))

    return max(neighbours, key=shared)  # max keeps the first (lower) one on a tie
