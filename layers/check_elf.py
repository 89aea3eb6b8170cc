"""Fail when a shared library under a folder has a LOAD segment whose file offset and virtual
address disagree modulo its alignment: the dynamic loader refuses such a file ("ELF load
command address/offset not page-aligned"), which is what `strip` makes of a library patchelf
has rewritten. Runs after the strip step of build_python_layer.sh; stdlib only, any Python 3.

    python3 layers/check_elf.py FOLDER
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

PT_LOAD = 1


def misaligned_loads(path: Path) -> list[str]:
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:  # 64-bit little-endian only
        return []
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    bad = []
    for i in range(phnum):
        p_type, _, offset, vaddr, _, _, _, align = struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == PT_LOAD and align > 1 and (offset - vaddr) % align:
            bad.append(f"offset {offset:#x} vaddr {vaddr:#x} align {align:#x}")
    return bad


def main(folder: str) -> int:
    root = Path(folder)
    failures = 0
    for path in sorted(root.rglob("*.so*")):
        if path.is_file() and not path.is_symlink():
            for problem in misaligned_loads(path):
                print(f"{path.relative_to(root)}: LOAD segment {problem}", file=sys.stderr)
                failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
