"""Files from others are data: reading a zip that anyone may have made (a run's model, a checkpoint, an
exported policy) without running anything from it and without inflating more than the kit expects.

A run dir is made to be shared (``retrokit export``, ``results/``), so every file in it is treated as a
download: values that an SB3 zip stores pickled (``{":serialized:": ...}`` in its JSON ``data``) are never
unpickled (the kit takes them from ``config.yaml``), and a member's size is checked in the zip's central
directory, against what the caller expects, before a byte of it is inflated. Core: no torch, SB3 or Ray here
(the engines load the weights, with ``torch.load(..., weights_only=True)``).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from typing import Any

from retro_atari_kit.errors import RunError
from retro_atari_kit.files import read_error_message

#: the key SB3's ``data_to_json`` gives a value it stored with cloudpickle
SERIALIZED = ":serialized:"
#: members at most this large may compress as well as they like (JSON, text, empty optimizer states)
SMALL_MEMBER = 1 << 20
#: deflate ratio above which a larger member is refused: float32 weights deflate ~1.1:1, zeros ~1000:1
MAX_RATIO = 50
#: the most any member the kit reads may hold when the caller names no budget for it
DEFAULT_BUDGET = 64 << 20
#: members that hold JSON (exempt from the ratio check, bounded by their budget)
JSON_MEMBERS = ("data",)
_CHUNK = 1 << 20


class UntrustedFileError(RunError):
    """A file that the kit refuses to read because reading it could run code or exhaust memory."""


class UnreadableFileError(UntrustedFileError):
    """A file the operating system does not let the kit read (permission denied, a disk error, a folder
    where the file belongs): refused like an untrusted file, with the OS's reason and the path, so that no
    caller reports it as a damaged or foreign file (which would invite replacing a good one)."""


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n} bytes"


def check_members(
    zf: zipfile.ZipFile, path: str, budgets: Mapping[str, int] | None = None, default: int = DEFAULT_BUDGET
) -> dict[str, zipfile.ZipInfo]:
    """The zip's members by name, after checking each in the central directory (nothing inflated):
    UntrustedFileError unless every member is a plain name (no folder, no ``..``), unencrypted, at most
    ``budgets[name]`` (else ``default``) bytes inflated, and not compressed ``MAX_RATIO`` times or more
    when larger than ``SMALL_MEMBER`` (JSON members excepted: SB3's ``data`` holds the last observations,
    pickled and base64-encoded, which deflate ~950:1 when the screens are blank; its budget bounds it)."""
    budgets = budgets or {}
    members: dict[str, zipfile.ZipInfo] = {}
    for info in zf.infolist():
        name = info.filename
        where = f"{path} member {name!r}"
        if "/" in name or "\\" in name or name.startswith(".."):
            raise UntrustedFileError(f"{where}: a path, not a file name; the kit writes none (refused)")
        if info.flag_bits & 0x1:
            raise UntrustedFileError(f"{where}: encrypted; the kit writes no encrypted members (refused)")
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > SMALL_MEMBER and ratio >= MAX_RATIO and name not in JSON_MEMBERS:
            raise UntrustedFileError(
                f"{where} is compressed {ratio:.0f}:1 ({_size(info.compress_size)} -> "
                f"{_size(info.file_size)}); model weights never are; refused before inflating"
            )
        limit = budgets.get(name, default)
        if info.file_size > limit:
            raise UntrustedFileError(
                f"{where} would inflate to {_size(info.file_size)}, more than the {_size(limit)} the kit "
                "expects of it; refused before inflating (a damaged or hostile file)"
            )
        if name in members:
            raise UntrustedFileError(f"{where}: stored twice; the kit writes each member once (refused)")
        members[name] = info
    return members


def read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> bytes:
    """The member's bytes, inflated in chunks and never past the size its directory entry states (a local
    header that lies about it is refused, not followed)."""
    chunks, total = [], 0
    with zf.open(info) as fh:
        while chunk := fh.read(_CHUNK):
            total += len(chunk)
            if total > info.file_size:
                raise UntrustedFileError(
                    f"{path} member {info.filename!r} inflates past its stated "
                    f"{_size(info.file_size)}; refused"
                )
            chunks.append(chunk)
    return b"".join(chunks)


def read_json_member(path: str, name: str = "data", limit: int = DEFAULT_BUDGET) -> dict[str, Any]:
    """The JSON object stored as ``name`` in the zip ``path`` (size-checked first). Raises
    FileNotFoundError, UnreadableFileError (the OS refuses to open it: permission denied, ...),
    zipfile.BadZipFile, KeyError (no member), ValueError (not JSON, nested too deeply; UntrustedFileError is
    one)."""
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnreadableFileError(read_error_message(exc)) from None
    with zf:
        members = check_members(zf, path, {name: limit})
        try:
            data = json.loads(read_member(zf, members[name], path))
        except RecursionError:  # nested thousands of levels deep: no writer the kit reads makes that
            raise ValueError(f"{name} is nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError(f"{name} is {type(data).__name__}, not a JSON object")
    return data


def serialized_keys(data: Mapping[str, Any]) -> list[str]:
    """The keys of an SB3 ``data`` mapping whose values are pickled (reading them would run cloudpickle)."""
    return [key for key, value in data.items() if isinstance(value, dict) and SERIALIZED in value]


def plain_values(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without its pickled values: what can be read as data."""
    pickled = set(serialized_keys(data))
    return {key: value for key, value in data.items() if key not in pickled}


def refuse_pickled(path: str, data: dict[str, Any]) -> UntrustedFileError:
    """The one line for an SB3 zip that only unpickling could load (no run config to take its values from)."""
    keys = ", ".join(repr(k) for k in serialized_keys(data)[:3]) or "its values"
    return UntrustedFileError(
        f"{path} is not inside a run dir made by retrokit: loading it would unpickle {keys}, which can run "
        "code; put it back in its run dir (with config.yaml), or pass --allow-pickle if you trust its maker"
    )


def zip_is_sane(path: str, total_budget: int = 4 << 30) -> bool:
    """True if the zip's directory is within ``total_budget`` bytes inflated and no member is a compression
    bomb: the check to make before reading every member (e.g. ``ZipFile.testzip``)."""
    try:
        with zipfile.ZipFile(path) as zf:
            members = check_members(zf, path, default=total_budget)
    except (UntrustedFileError, zipfile.BadZipFile, OSError, EOFError, ValueError):
        return False
    return sum(info.file_size for info in members.values()) <= total_budget
