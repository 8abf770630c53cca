#!/usr/bin/env python3
"""Compares two dumps of tests/engine/dump_outputs.cc (build/tests/engine_dump_outputs OUT) byte
for byte, record by record, and says which records differ and by how much (f32 records).

  compare_outputs.py BEFORE.bin AFTER.bin      exit 0 when every record is identical

How to check that a refactoring changes no output (docs/architecture.md): build the commit
before it, run `build/tests/engine_dump_outputs before.bin`, build the change, run it again into
after.bin, then this script.
"""

import struct
import sys


def load(path):
    data = open(path, "rb").read()
    records, i = {}, 0
    while i < len(data):
        j = data.index(b"\n", i)
        header = data[i:j].decode()
        size = int(header.rsplit("bytes=", 1)[1])
        records[header] = data[j + 1:j + 1 + size]
        i = j + 1 + size
    return records


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    before, after = load(sys.argv[1]), load(sys.argv[2])
    if list(before) != list(after):
        print("the dumps hold different records (another dump_outputs version?)")
        return 1
    differing = {}
    for header, old in before.items():
        new = after[header]
        if old == new:
            continue
        model = header.split(" ")[0]
        count, worst = differing.get(model, (0, 0.0))
        if " type " not in header and len(old) % 4 == 0:  # f32 rows
            a = struct.unpack(f"<{len(old) // 4}f", old)
            b = struct.unpack(f"<{len(new) // 4}f", new)
            worst = max(worst, max(abs(x - y) for x, y in zip(a, b)))
        differing[model] = (count + 1, worst)
    print(f"{len(before)} records compared")
    for model, (count, worst) in differing.items():
        print(f"  {model}: {count} records differ, largest f32 difference {worst:.3g}")
    if not differing:
        print("  every record is byte-identical")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
