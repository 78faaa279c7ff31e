#!/usr/bin/env python3
"""Fails when a folder includes a folder of a higher layer (docs/architecture.md).

Each line of LAYERS is one layer, bottom first, made of groups of folders (a folder and its
subfolders: a backend's CUDA half beside its interface). A source file may include headers of its
own group and of lower layers; never of a higher layer, nor of another group of its own layer
(batch and serve are both fronts and stay independent).
Usage: check_layers.py [repo root]
"""
import os
import re
import sys

LAYERS = [
    ["src/core"],
    ["io"],
    ["kernels", "kernels/cpu", "kernels/cuda"],
    ["src/backend", "src/backend/cpu", "src/backend/cuda"],
    ["src/parallel", "src/parallel/nccl"],
    ["src/model"],
    ["src/engine"],
    ["src/text"],
    ["src/constrain"],
    ["src/requests"],
    ["src/batch", "src/serve"],
    ["src/plan"],
    ["src/doctor"],
    ["src/app", "src/app/commands"],
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(folder):
    for i, names in enumerate(LAYERS):
        if folder in names:
            return i
    return None


def group_of(folder):
    parts = folder.split("/")
    return "/".join(parts[:2]) if parts[0] == "src" else parts[0]


def resolve(root, src_dir, inc):
    """The repository folder a quoted include names (include roots: the file's folder, src/, .)."""
    for base in (src_dir, os.path.join(root, "src"), root):
        path = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(path):
            return os.path.relpath(os.path.dirname(path), root)
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../.."))
    bad, checked, unknown = [], 0, []
    for names in LAYERS:
        for folder in names:
            d = os.path.join(root, folder)
            if not os.path.isdir(d):
                continue
            for f in sorted(os.listdir(d)):
                if not f.endswith((".h", ".cpp", ".cu", ".cuh")):
                    continue
                checked += 1
                text = open(os.path.join(d, f), encoding="utf-8").read()
                for inc in INCLUDE.findall(text):
                    target = resolve(root, d, inc)
                    if target is None:
                        unknown.append(f"{folder}/{f}: \"{inc}\" not found")
                        continue
                    if target == folder:
                        continue
                    lt, lf = layer_of(target), layer_of(folder)
                    if lt is None:
                        unknown.append(f"{folder}/{f}: includes {target}, a folder in no layer")
                    elif lt > lf or (lt == lf and group_of(target) != group_of(folder)):
                        bad.append(f"{folder}/{f} includes \"{inc}\" ({target}, layer {lt}) "
                                   f"from layer {lf}")
    # Every source folder must sit in a layer, so a new folder cannot escape the check.
    for top in ("src", "io", "kernels"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            rel = os.path.relpath(dirpath, root)
            if any(f.endswith((".h", ".cpp", ".cu", ".cuh")) for f in files) and layer_of(rel) is None:
                unknown.append(f"{rel}: a source folder in no layer (add it to LAYERS)")
    for line in bad + unknown:
        print("layering:", line)
    print(f"layering: {checked} files checked, {len(bad)} upward includes, {len(unknown)} unplaced")
    return 1 if bad or unknown or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
