#!/usr/bin/env python3
"""Writes the GGUF reader's fuzz seeds (a few hundred bytes each) into the folder given.

The seeds are made here rather than committed: tiny GGUF v3 files with metadata of every value kind,
one with an F32 and a Q8_0 tensor, one with metadata only, and a truncated v2 header.
tests/fuzz/run.sh calls this before fuzzing fuzz_gguf.
"""
import os
import struct
import sys


def string(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, value_type, payload):
    return string(key) + struct.pack("<I", value_type) + payload


def gguf(kvs, tensors, align=32):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    offset, datas = 0, []
    for name, dims, ggml_type, data in tensors:
        out += string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ggml_type, offset)
        pad = (-len(data)) % align
        datas.append(data + b"\0" * pad)
        offset += len(data) + pad
    out += b"\0" * ((-len(out)) % align)
    return out + b"".join(datas)


def main(folder):
    os.makedirs(folder, exist_ok=True)
    kvs = [
        kv("general.architecture", 8, string("llama")),
        kv("general.alignment", 4, struct.pack("<I", 32)),
        kv("llama.context_length", 4, struct.pack("<I", 128)),
        kv("llama.rope.freq_base", 6, struct.pack("<f", 10000.0)),
        kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + string("<unk>") + string("<s>") + string("a")),
        kv("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 3) + struct.pack("<3f", 0, 0, -1)),
        kv("general.flag", 7, b"\x01"),
        kv("general.u64", 10, struct.pack("<Q", 2**40)),
    ]
    f32 = struct.pack("<8f", *range(8))
    q8_0 = struct.pack("<e", 0.5) + bytes(range(32))
    seeds = {
        "two_tensors.gguf": gguf(kvs, [("tok_embd.weight", [4, 2], 0, f32), ("blk.0.attn_q.weight", [32, 1], 8, q8_0)]),
        "metadata_only.gguf": gguf(kvs, []),
        "v2_header.gguf": b"GGUF" + struct.pack("<IQQ", 2, 0, 1) + kv("general.name", 8, string("x")),
    }
    for name, data in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv[1])
