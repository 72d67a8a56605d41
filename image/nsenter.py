"""Copy nsenter and the shared libraries it needs beyond the C library out of unpacked Debian packages.

Usage (in the image's builder stage): ``python nsenter.py UNPACKED OUT DEBIAN_ARCH``. UNPACKED holds the
target platform's util-linux and library packages unpacked with ``dpkg-deb -x``; OUT receives
``usr/bin/nsenter`` and each needed library under ``usr/lib/<multiarch triplet>/`` (their real paths on
Debian 12's merged /usr). The needed libraries are read from the ELF files' dynamic sections (DT_NEEDED),
never by running them, so this works for any target architecture. The C library and the dynamic loader
come with the final base (distroless has libc6); any other library that is not among the unpacked
packages fails the build.
"""

from __future__ import annotations

import os
import shutil
import struct
import sys

# Debian architecture -> (multiarch triplet, ELF e_machine).
ARCHES = {"amd64": ("x86_64-linux-gnu", 62), "arm64": ("aarch64-linux-gnu", 183)}
IN_BASE = {"libc.so.6", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
SHT_DYNAMIC, DT_NULL, DT_NEEDED = 6, 0, 1


def needed(path: str, machine: int) -> list[str]:
    """The DT_NEEDED entries of a 64-bit little-endian ELF file for ``machine``."""
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        sys.exit(f"nsenter.py: {path} is not a 64-bit little-endian ELF file")
    (found,) = struct.unpack_from("<H", data, 0x12)
    if found != machine:
        sys.exit(f"nsenter.py: {path} is for ELF machine {found}, not {machine}")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, _entsize in sections:
        if kind != SHT_DYNAMIC:
            continue
        strings = sections[link][4]
        for entry in range(offset, offset + size, 16):
            tag, value = struct.unpack_from("<qQ", data, entry)
            if tag == DT_NULL:
                break
            if tag == DT_NEEDED:
                start = strings + value
                names.append(data[start : data.index(b"\0", start)].decode())
    return names


def main() -> None:
    unpacked, out, arch = sys.argv[1:4]
    if arch not in ARCHES:
        sys.exit(f"nsenter.py: no rule for architecture {arch}")
    triplet, machine = ARCHES[arch]
    os.makedirs(os.path.join(out, "usr/bin"))
    os.makedirs(os.path.join(out, "usr/lib", triplet))
    target = os.path.join(out, "usr/bin/nsenter")
    shutil.copy2(os.path.join(unpacked, "usr/bin/nsenter"), target)
    queue, seen = [target], set()
    while queue:
        for name in needed(queue.pop(), machine):
            if name in IN_BASE or name in seen:
                continue
            seen.add(name)
            found = [
                os.path.join(unpacked, where, triplet, name)
                for where in ("usr/lib", "lib")
                if os.path.exists(os.path.join(unpacked, where, triplet, name))
            ]
            if not found:
                sys.exit(f"nsenter.py: {name} is needed but not in the unpacked packages")
            copy = os.path.join(out, "usr/lib", triplet, name)
            shutil.copy2(os.path.realpath(found[0]), copy)
            queue.append(copy)
    print(f"nsenter.py: nsenter for {arch} with {', '.join(sorted(seen)) or 'the C library only'}")


if __name__ == "__main__":
    main()
