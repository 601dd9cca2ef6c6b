#!/usr/bin/env python3
"""Make every TCPStore that torch.distributed creates honour USE_LIBUV (image build step).

Debian's python3-torch is built without libuv, and TCPStore's default is libuv: torchrun's
c10d rendezvous, its agent store clients and init_process_group("env://") then fail with
"use_libuv was requested but PyTorch was build without libuv support". Some of these calls
read USE_LIBUV, some pass nothing. This appends `use_libuv=<USE_LIBUV != "0">` to every
`TCPStore(...)` call under torch/distributed that does not name use_libuv, so USE_LIBUV=0 (set
by the venv's .pth file) reaches all of them.

    python3 torch-no-libuv.py /usr/lib/python3/dist-packages/torch/distributed
"""
import os
import sys

ARG = 'use_libuv=__import__("os").environ.get("USE_LIBUV", "1") == "1"'


def patch(text):
    out, pos, count = [], 0, 0
    while True:
        start = text.find("TCPStore(", pos)
        if start < 0:
            out.append(text[pos:])
            return "".join(out), count
        open_at = start + len("TCPStore(") - 1
        depth, i = 0, open_at
        while i < len(text):
            if text[i] == "(":
                depth += 1
            elif text[i] == ")":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        call = text[open_at + 1:i]
        out.append(text[pos:open_at + 1])
        if "use_libuv" in call or not call.strip() or i >= len(text):
            out.append(call)
        else:
            body = call.rstrip()
            tail = call[len(body):]
            sep = " " if body.endswith(",") else ", "
            out.append(body + sep + ARG + ("," if body.endswith(",") else "") + tail)
            count += 1
        pos = i


def main(root):
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            new, count = patch(text)
            if count:
                compile(new, path, "exec")  # never leave a broken file behind
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(new)
                print(f"torch-no-libuv: {path}: {count} call(s)")
                total += count
    return 0 if total else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
