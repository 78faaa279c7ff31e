"""A small, independent safetensors reader and writer for the test oracle.

Written from the format description (8-byte little-endian header length, JSON header with
dtype/shape/data_offsets relative to the data buffer, row-major little-endian data) so the
reference never shares a line of code with the engine's loader it checks. Float tensors come
back as float64; the writer exists so tests can build exact fixtures.
"""

import json
import os
import struct

import numpy as np

# Bytes per element of the dtypes the reference can turn into float64.
_FLOAT_DTYPES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8}
# Integer dtypes it reads as int64 (the packed words and group indices of int4 checkpoints, and
# FP8 checkpoints' e4m3 bytes, as their raw codes 0..255: fp8_ref.py gives them values).
_INT_DTYPES = {"I32": 4, "F8_E4M3": 1}
_MAX_HEADER = 100_000_000
INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"


class SafetensorsError(ValueError):
    pass


def decode(raw: bytes, dtype: str) -> np.ndarray:
    """Little-endian bytes of one tensor -> flat float64 array."""
    if dtype == "BF16":
        # bf16 is the upper half of an IEEE float32: widen the bits, reinterpret.
        halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32)
        return (halves << 16).view(np.float32).astype(np.float64)
    if dtype == "F16":
        return np.frombuffer(raw, dtype="<f2").astype(np.float64)
    if dtype == "F32":
        return np.frombuffer(raw, dtype="<f4").astype(np.float64)
    if dtype == "F64":
        return np.frombuffer(raw, dtype="<f8").astype(np.float64)
    if dtype == "I32":
        return np.frombuffer(raw, dtype="<i4").astype(np.int64)
    if dtype == "F8_E4M3":
        return np.frombuffer(raw, dtype=np.uint8).astype(np.int64)
    raise SafetensorsError(f"dtype {dtype} is not a type the reference reads")


def read_header(path: str):
    """Returns (header dict without __metadata__, offset of the data buffer, buffer length)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if size < 8:
            raise SafetensorsError(f"{path}: {size} bytes, shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", f.read(8))
        if n > _MAX_HEADER or 8 + n > size:
            raise SafetensorsError(f"{path}: header length {n} does not fit a {size}-byte file")
        header = json.loads(f.read(n).decode("utf-8"))
    header.pop("__metadata__", None)
    data_start = 8 + n
    buffer_len = size - data_start
    spans = []
    for name, entry in header.items():
        dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype in _FLOAT_DTYPES or dtype in _INT_DTYPES:
            want = int(np.prod(shape, dtype=np.int64)) * {**_FLOAT_DTYPES, **_INT_DTYPES}[dtype]
            if end - begin != want:
                raise SafetensorsError(
                    f"{path}: {name} has {end - begin} bytes, shape {shape} {dtype} needs {want}")
        if not 0 <= begin <= end <= buffer_len:
            raise SafetensorsError(
                f"{path}: {name} offsets [{begin}, {end}) outside the {buffer_len}-byte buffer")
        spans.append((begin, end, name))
    spans.sort()
    for (_, end_a, a), (begin_b, _, b) in zip(spans, spans[1:]):
        if begin_b < end_a:
            raise SafetensorsError(f"{path}: tensors {a} and {b} overlap")
    return header, data_start, buffer_len


def read_file(path: str) -> dict:
    """All tensors of one .safetensors file: float ones as float64, I32 as int64 arrays."""
    header, data_start, _ = read_header(path)
    out = {}
    with open(path, "rb") as f:
        for name, entry in header.items():
            begin, end = entry["data_offsets"]
            f.seek(data_start + begin)
            raw = f.read(end - begin)
            out[name] = decode(raw, entry["dtype"]).reshape(entry["shape"])
    return out


def read_model_dir(model_dir: str) -> dict:
    """Tensors of a Hugging Face folder: model.safetensors, or the shards its index names."""
    index_path = os.path.join(model_dir, INDEX_NAME)
    if os.path.exists(index_path):
        with open(index_path) as f:
            weight_map = json.load(f)["weight_map"]
        tensors = {}
        for shard in sorted(set(weight_map.values())):
            for name, value in read_file(os.path.join(model_dir, shard)).items():
                if weight_map.get(name) != shard:
                    raise SafetensorsError(f"{shard} holds {name}; the index maps it elsewhere")
                tensors[name] = value
        missing = sorted(set(weight_map) - set(tensors))
        if missing:
            raise SafetensorsError(f"index names tensors no shard holds: {missing[:5]}")
        return tensors
    return read_file(os.path.join(model_dir, SINGLE_NAME))


def _encode(array: np.ndarray, dtype: str) -> bytes:
    a = np.ascontiguousarray(array)
    if dtype == "BF16":
        # Round to nearest even, like a framework's float32 -> bf16 cast (finite inputs only).
        bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return rounded.astype("<u2").tobytes()
    if dtype == "F16":
        return a.astype("<f2").tobytes()
    if dtype == "F32":
        return a.astype("<f4").tobytes()
    if dtype == "F64":
        return a.astype("<f8").tobytes()
    raise SafetensorsError(f"writer does not support {dtype}")


def write_file(path: str, tensors: dict, dtype: str) -> None:
    """Writes name -> array as one safetensors file, every tensor in `dtype`."""
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        raw = _encode(tensors[name], dtype)
        header[name] = {"dtype": dtype, "shape": list(np.shape(tensors[name])),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in chunks:
            f.write(raw)


def write_model_dir(model_dir: str, tensors: dict, dtype: str, shards: int = 1) -> None:
    """Writes model.safetensors, or `shards` files plus model.safetensors.index.json."""
    os.makedirs(model_dir, exist_ok=True)
    if shards == 1:
        write_file(os.path.join(model_dir, SINGLE_NAME), tensors, dtype)
        return
    names = sorted(tensors)
    weight_map, total = {}, 0
    for k in range(shards):
        part = names[k::shards]
        shard = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        write_file(os.path.join(model_dir, shard), {n: tensors[n] for n in part}, dtype)
        for n in part:
            weight_map[n] = shard
            total += int(np.prod(np.shape(tensors[n]))) * _FLOAT_DTYPES[dtype]
    with open(os.path.join(model_dir, INDEX_NAME), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
