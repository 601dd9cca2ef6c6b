# -*- coding: utf-8 -*-
# Copyright (c) clusterops.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Note: this module is private to the clusterops.slurm collection. Its API may change
# at any time without notice; do not use it from outside the collection.

"""File formats read without torch: torch.save zips, safetensors headers, torch.distributed.checkpoint metadata."""

from __future__ import annotations

import json
import pickle
import struct
import zipfile

try:
    from typing import Any, List, Optional, Tuple  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from .bounds import bytes_problem
from .common import CHUNK_SIZE, Invalid, MAX_MANIFEST_BYTES, MAX_PICKLE_BYTES


def check_torch_zip(path: str, read_all: bool = False) -> Optional[str]:
    """Why a torch.save file (a zip archive) is broken, or None when it looks whole.

    Reads only the end of central directory, the central directory and each entry's local header
    (and data descriptor), so a file truncated by a few bytes or with a torn entry is caught without
    reading the data. With ``read_all`` every entry is also read once and its CRC-32 compared.
    """
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
            if head != b"PK\x03\x04":
                if not head:
                    return "empty file"
                if head[:1] == b"\x80":
                    return "legacy torch.save format (a pickle, not a zip): cannot be checked"
                return "not a zip archive (torch.save writes zip archives)"
            try:
                archive = zipfile.ZipFile(handle)
            except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, struct.error) as exc:
                return "zip end of central directory missing or damaged (truncated?): %s" % exc
            infos = archive.infolist()
            if not any(i.filename == "data.pkl" or i.filename.endswith("/data.pkl") for i in infos):
                return "zip without data.pkl: not a torch.save file"
            problem = _check_local_headers(handle, infos, getattr(archive, "start_dir", None))
            if problem:
                return problem
            if read_all:
                for info in infos:
                    try:
                        with archive.open(info) as entry:
                            while entry.read(CHUNK_SIZE):
                                pass
                    except (zipfile.BadZipFile, EOFError, OSError, ValueError, struct.error) as exc:
                        return "zip entry %s: %s" % (info.filename, exc)
    except OSError as exc:
        return "cannot read: %s" % exc
    return None


def _check_local_headers(handle: Any, infos: List[Any], start_dir: Optional[int]) -> Optional[str]:
    ordered = sorted(infos, key=lambda i: i.header_offset)
    end_limit = start_dir
    for index, info in enumerate(ordered):
        if info.header_offset < 0:
            # zipfile shifts every offset when the central directory is not where the end record
            # says: bytes are missing (or were added) before it.
            return "zip entry %s: bytes missing before the central directory" % info.filename
        handle.seek(info.header_offset)
        header = handle.read(30)
        if len(header) < 30 or header[:4] != b"PK\x03\x04":
            return "zip entry %s: no local header at offset %d" % (info.filename, info.header_offset)
        flags = struct.unpack("<H", header[6:8])[0]
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        raw_name = handle.read(name_len)
        try:
            name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
        except UnicodeDecodeError:
            name = None
        if name != info.orig_filename:
            return "zip entry %s: local header names %r" % (info.filename, raw_name)
        data_end = info.header_offset + 30 + name_len + extra_len + info.compress_size
        if flags & 0x08:
            handle.seek(data_end)
            desc = handle.read(24)
            if desc[:4] == b"PK\x07\x08":
                desc = desc[4:]
                data_end += 4
            zip64 = info.compress_size >= 0xFFFFFFFF or info.file_size >= 0xFFFFFFFF
            size_fmt, desc_len = ("<IQQ", 20) if zip64 else ("<III", 12)
            if len(desc) < desc_len:
                return "zip entry %s: data descriptor cut off" % info.filename
            crc, csize, _usize = struct.unpack(size_fmt, desc[:desc_len])
            if crc != info.CRC or csize != info.compress_size:
                return "zip entry %s: data descriptor disagrees with the central directory" % info.filename
            data_end += desc_len
        following = ordered[index + 1].header_offset if index + 1 < len(ordered) else end_limit
        if following is not None and data_end > following:
            return "zip entry %s: data runs past offset %d" % (info.filename, following)
    return None


def check_safetensors(path: str, size: int) -> Optional[str]:
    """Why a safetensors file is broken (its header must describe exactly the bytes after it)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(8)
            if len(raw) < 8:
                return "safetensors file shorter than its header length"
            header_len = struct.unpack("<Q", raw)[0]
            if header_len > size - 8 or header_len > MAX_MANIFEST_BYTES:
                return "safetensors header length %d does not fit in %d bytes" % (header_len, size)
            header = json.loads(handle.read(header_len).decode("utf-8"))
    except (OSError, ValueError) as exc:
        return "safetensors header unreadable: %s" % exc
    end = 0
    for key, value in header.items() if isinstance(header, dict) else ():
        if key == "__metadata__":
            continue
        offsets = value.get("data_offsets") if isinstance(value, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            return "safetensors tensor %s has no data_offsets" % key
        end = max(end, offsets[1])
    data = size - 8 - header_len
    if end != data:
        return "safetensors tensors need %d data bytes, the file holds %d (truncated?)" % (end, data)
    return None


class _Stub(object):
    """Stands for any class named in a pickle; keeps its state, runs nothing."""

    module = ""
    qualname = ""

    def __init__(self, *args, **kwargs):
        self.__dict__["_args"] = args

    def __setstate__(self, state):
        parts = state if isinstance(state, tuple) else (state,)
        for part in parts:
            if isinstance(part, dict):
                self.__dict__.update(part)

    def __call__(self, *args, **kwargs):
        return _Stub(*args)

    # Containers pickled as subclasses of dict or list fill themselves with these.
    def __setitem__(self, key, value):
        self.__dict__.setdefault("_items", {})[key] = value

    def append(self, value):
        self.__dict__.setdefault("_list", []).append(value)

    def extend(self, values):
        self.__dict__.setdefault("_list", []).extend(values)


class StubUnpickler(pickle.Unpickler):
    """Reads a pickle without importing or calling anything it names (torch is not needed)."""

    def find_class(self, module, name):
        # Each global becomes a class of its own name; calling it makes a stub instance.
        return type(str(name), (_Stub,), {"module": module, "qualname": name})

    def persistent_load(self, pid):
        return None


def torch_pickle_root(path: str) -> Any:
    """The object a torch.save file's ``data.pkl`` holds, read without torch (:class:`StubUnpickler`: every
    class becomes an inert stand-in, tensors None): a Lightning checkpoint's dict, a DeepSpeed model-state dict.

    Raises:
        Invalid: the file is not a whole torch.save zip, or its ``data.pkl`` is cut short or corrupt.
        ValueError: it is whole but cannot be read this way (a legacy pickle-format file, a ``data.pkl``
            over :data:`MAX_PICKLE_BYTES`, a shape the stand-ins cannot take).
    """
    problem = check_torch_zip(path)
    if problem:
        if problem.startswith("legacy"):
            raise ValueError("a legacy torch.save file: it cannot be read without torch")
        raise Invalid(problem)
    with zipfile.ZipFile(path) as archive:
        infos = [i for i in archive.infolist() if i.filename == "data.pkl" or i.filename.endswith("/data.pkl")]
        if infos[0].file_size > MAX_PICKLE_BYTES:
            raise ValueError("data.pkl is %d bytes, more than the %d read without torch" % (
                infos[0].file_size, MAX_PICKLE_BYTES))
        with archive.open(infos[0]) as handle:
            try:
                return StubUnpickler(handle).load()
            except (EOFError, pickle.UnpicklingError, struct.error, UnicodeDecodeError) as exc:
                raise Invalid("data.pkl is cut short or corrupt: %s: %s" % (type(exc).__name__, exc))
            except Exception as exc:  # pylint: disable=broad-except  # a shape the stand-ins cannot take
                raise ValueError("data.pkl could not be read without torch: %s: %s" % (type(exc).__name__, exc))


def dcp_storage(metadata_path: str) -> List[Tuple[str, int, int]]:
    """``(relative_path, offset, length)`` of every item a torch.distributed.checkpoint ``.metadata``
    (``Metadata.storage_data``, ``_StorageInfo`` records) says is stored; [] when it names none.

    Raises Invalid when the pickle is cut short or corrupt, or an offset or length is out of range
    (:mod:`.bounds`: an integer of 0 to 2**63-1). A pickle that is whole but shaped in a
    way this reader does not know gives [] (the sizes are then not checked), never invalid.
    """
    with open(metadata_path, "rb") as handle:
        try:
            root = StubUnpickler(handle).load()
        except (EOFError, pickle.UnpicklingError, struct.error, UnicodeDecodeError) as exc:
            raise Invalid(".metadata is cut short or corrupt: %s: %s" % (type(exc).__name__, exc))
        except Exception:  # pylint: disable=broad-except  # a shape the stand-ins cannot take
            return []
    storage = getattr(root, "storage_data", None)
    if isinstance(storage, _Stub):  # a dict subclass
        storage = storage.__dict__.get("_items")
    if not isinstance(storage, dict):
        return []
    found = []
    for info in storage.values():
        rel, offset, length = (getattr(info, "relative_path", None), getattr(info, "offset", None),
                               getattr(info, "length", None))
        if isinstance(rel, str) and isinstance(offset, int) and isinstance(length, int):
            problem = bytes_problem(offset, "offset") or bytes_problem(length, "length")
            if problem:   # a pickle holds integers of any length: one too long even to print stops here
                raise Invalid(".metadata says %s for %s" % (problem, rel[:200]))
            found.append((rel, offset, length))
    return found
