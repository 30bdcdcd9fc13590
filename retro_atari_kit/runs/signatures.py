"""Which checkpoints this user's kit wrote: an HMAC over a checkpoint folder's files, with a key that never
leaves this user's data folder (as Jupyter signs the notebooks it trusts).

Some engines' full training state can only be read by unpickling it (RLlib's ``restore_from_path`` reads
its state files with pickle): resuming from an untrusted checkpoint would run their code. The kit
signs each such checkpoint when it writes one and restores only those whose signature this user's key
verifies; everything else in a run dir is read without unpickling (``runs.untrusted``). Core: no torch or Ray.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets

from retro_atari_kit.errors import RunError

SIGNATURE_FILE = "retrokit-signature.json"
_KEY_BYTES = 32


def key_path() -> str:
    """``$XDG_DATA_HOME/retrokit/checkpoint-key`` (``~/.local/share/...`` by default)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "retrokit", "checkpoint-key")


def _key(create: bool) -> bytes | None:
    path = key_path()
    try:
        with open(path, "rb") as fh:
            key = fh.read()
        return key if len(key) == _KEY_BYTES else None
    except FileNotFoundError:
        if not create:
            return None
    except OSError:
        return None
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return _key(create=False)
    except OSError:  # no writable data folder: nothing can be signed
        return None
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_bytes(_KEY_BYTES))
    return _key(create=False)


def _digest(key: bytes, folder: str) -> str | None:
    """HMAC-SHA256 of every file under ``folder`` (relative name and SHA-256 of its bytes, sorted), or
    None if the folder holds a link or something that is not a regular file (no checkpoint of ours does)."""
    entries = []
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            if os.path.islink(path) or not (os.path.isdir(path) or os.path.isfile(path)):
                return None
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), folder)
            if rel == SIGNATURE_FILE:
                continue
            sha = hashlib.sha256()
            with open(os.path.join(root, name), "rb") as fh:
                while chunk := fh.read(1 << 20):
                    sha.update(chunk)
            entries.append(f"{rel}\0{sha.hexdigest()}")
    return hmac.new(key, "\n".join(sorted(entries)).encode(), hashlib.sha256).hexdigest()


def sign_checkpoint(folder: str) -> bool:
    """Write ``folder``'s signature (call once its files are complete); False if this user has no data
    folder to keep a key in (the checkpoint then cannot be resumed from)."""
    key = _key(create=True)
    digest = None if key is None else _digest(key, folder)
    if digest is None:
        return False
    with open(os.path.join(folder, SIGNATURE_FILE), "w", encoding="ascii") as fh:
        json.dump({"hmac-sha256": digest}, fh)
    return True


def check_signed(folder: str, what: str = "RLlib's state files") -> None:
    """RunError unless ``folder`` carries a signature this user's key verifies: it was written by the kit,
    as this user, on a machine with this key, and not changed since."""
    key = _key(create=False)
    try:
        with open(os.path.join(folder, SIGNATURE_FILE), encoding="ascii") as fh:
            stored = json.load(fh).get("hmac-sha256")
    except (OSError, ValueError, AttributeError):
        stored = None
    digest = None if key is None or not isinstance(stored, str) else _digest(key, folder)
    if digest is None or not hmac.compare_digest(digest, stored):
        raise RunError(
            f"{folder} was not written by retrokit as this user here (no valid signature), or was changed "
            f"since; resuming reads {what} with pickle, which can run code: resume only your own runs (its "
            "policy.pt loads without unpickling: retrokit eval / record / export still work)"
        )
