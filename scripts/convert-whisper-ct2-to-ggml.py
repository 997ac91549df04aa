#!/usr/bin/env python3
"""Converts a CTranslate2 (faster-whisper) Whisper model directory into whisper.cpp's ggml file.

Usage: convert-whisper-ct2-to-ggml.py MODEL_DIR OUTPUT_FILE
  MODEL_DIR    a faster-whisper model: config.json, model.bin (float16 or float32), tokenizer.json
  OUTPUT_FILE  e.g. MODELS_DIR/ggml-base.bin (whisper.cpp's name for the model)
Needs numpy only. The weights are written in float16, as upstream's ggml-<name>.bin files are.

Where each fact comes from (read, not copied):
- The ggml file: ggml-org/whisper.cpp, models/convert-pt-to-ggml.py (magic 0x67676d6c, the eleven
  int32 hyper-parameters in the order of `whisper_model_load`'s reads, ftype 1 = float16; the mel
  filters as n_mel, n_fft then n_mel*n_fft float32; the vocabulary as a count then length-prefixed
  byte strings; each tensor as n_dims, name length, type (0 float32, 1 float16), the extents
  innermost first, the name, the data; 1-D tensors, the conv biases reshaped to [n, 1] and both
  positional embeddings stay float32) and src/whisper.cpp `whisper_model_load` plus
  src/whisper-arch.h `ASR_TENSOR_NAMES` (the tensor names and the types the loader insists on;
  attention keys have no bias), as whisper.cpp 1.9.1 ships them in the npm package nodejs-whisper.
- model.bin: OpenNMT/CTranslate2, python/ctranslate2/specs/model_spec.py `_serialize` (binary
  version, spec name and revision, then per variable: name as uint16 length + bytes + NUL, rank as
  uint8, uint32 extents, dtype id as uint8 in the order float32, int8, int16, int32, float16,
  bfloat16, uint32 byte count, data; then aliases as name pairs). Layout of a Whisper model:
  specs/whisper_spec.py, specs/transformer_spec.py, specs/attention_spec.py, and
  python/ctranslate2/converters/transformers.py (`WhisperLoader`, `BartLoader.set_attention`:
  self-attention's q, k, v fused into `linear_0`, cross-attention's k, v into `linear_1`, with
  zeros where Whisper has no key bias: converters/utils.py `fuse_linear`; the output projection is
  an alias of the token embedding). Checked on ctranslate2 4.8.5.
- Mel filters: openai/whisper, whisper/audio.py `mel_filters` (its assets/mel_filters.npz is
  librosa.filters.mel(sr=16000, n_fft=400, n_mels=80 or 128)); librosa/librosa,
  librosa/filters.py `mel` and librosa/core/convert.py `mel_frequencies` (Slaney scale: linear
  200/3 Hz per mel below 1 kHz, then logarithmic with step ln(6.4)/27; triangles normalised to
  2 / bandwidth), computed here with numpy.
- Vocabulary: tokenizer.json's byte-level BPE vocabulary, turned back into bytes with GPT-2's
  byte-to-unicode table (openai/gpt-2, src/encoder.py `bytes_to_unicode`, as convert-pt-to-ggml.py
  uses it); only the tokens before <|endoftext|> are written (convert-pt-to-ggml.py writes
  tiktoken's ranks, which end there; whisper.cpp names the special and timestamp tokens itself).
"""

import json
import struct
import sys
from pathlib import Path

import numpy as np

GGML_MAGIC = 0x67676D6C
GGML_FTYPE_F16 = 1
CT2_BINARY_VERSION = 6
CT2_DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")
SAMPLE_RATE = 16000
N_FFT = 400


def read_ct2_model(path):
    """Every variable of a CTranslate2 model.bin, by name (aliases resolved)."""
    data = path.read_bytes()
    offset = 0

    def take(fmt):
        nonlocal offset
        values = struct.unpack_from("<" + fmt, data, offset)
        offset += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values

    def string():
        nonlocal offset
        length = take("H")
        text = data[offset : offset + length - 1].decode("utf-8")
        offset += length
        return text

    version = take("I")
    if version != CT2_BINARY_VERSION:
        sys.exit(f"{path}: CTranslate2 binary version {version}; this script reads version {CT2_BINARY_VERSION}")
    spec = string()
    if spec != "WhisperSpec":
        sys.exit(f"{path}: a {spec} model, not Whisper")
    take("I")  # the spec's revision (3 in ctranslate2 4.8.5); variables are looked up by name below
    variables = {}
    for _ in range(take("I")):
        name = string()
        shape = [take("I") for _ in range(take("B"))]
        dtype = CT2_DTYPES[take("B")]
        size = take("I")
        if dtype == "bfloat16":
            sys.exit(f"{path}: {name} is bfloat16; convert the model again with --quantization float16")
        variables[name] = np.frombuffer(data, dtype=dtype, count=size // np.dtype(dtype).itemsize,
                                        offset=offset).reshape(shape)
        offset += size
    for _ in range(take("I")):
        alias = string()
        variables[alias] = variables[string()]
    return variables


def mel_filters(n_mels):
    """librosa.filters.mel(sr=16000, n_fft=400, n_mels=n_mels): Slaney mel scale and norm."""
    f_sp = 200.0 / 3
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0

    def hz_to_mel(hz):
        return hz / f_sp if hz < min_log_hz else min_log_mel + np.log(hz / min_log_hz) / logstep

    mels = np.linspace(hz_to_mel(0.0), hz_to_mel(SAMPLE_RATE / 2), n_mels + 2)
    hz = np.where(mels < min_log_mel, f_sp * mels, min_log_hz * np.exp(logstep * (mels - min_log_mel)))
    fft_hz = np.linspace(0, SAMPLE_RATE / 2, 1 + N_FFT // 2)
    ramps = hz[:, None] - fft_hz[None, :]
    widths = np.diff(hz)
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (hz[2:] - hz[:-2]))[:, None]
    return weights.astype(np.float32)


def byte_decoder():
    """GPT-2's printable stand-in character → the byte it stands for."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {chr(b): b for b in printable}
    others = [b for b in range(256) if b not in printable]
    table.update({chr(256 + i): b for i, b in enumerate(others)})
    return table


def vocabulary(tokenizer_path):
    """The text tokens in id order, as bytes."""
    tokenizer = json.loads(tokenizer_path.read_text(encoding="utf-8"))
    vocab = tokenizer["model"]["vocab"]
    end = next(t["id"] for t in tokenizer["added_tokens"] if t["content"] == "<|endoftext|>")
    by_id = {i: token for token, i in vocab.items() if i < end}
    if sorted(by_id) != list(range(end)):
        sys.exit(f"{tokenizer_path}: the ids before <|endoftext|> ({end}) are not all there")
    decode = byte_decoder()
    return [bytes(decode[c] for c in by_id[i]) for i in range(end)]


def split(array, parts):
    return np.split(array, parts, axis=0)


def whisper_tensors(v, n_audio_layer, n_text_layer):
    """(whisper.cpp name, array) for every tensor whisper.cpp loads."""
    def linear(prefix, ct2):
        yield f"{prefix}.weight", v[f"{ct2}/weight"]
        yield f"{prefix}.bias", v[f"{ct2}/bias"]

    def norm(prefix, ct2):
        yield f"{prefix}.weight", v[f"{ct2}/gamma"]
        yield f"{prefix}.bias", v[f"{ct2}/beta"]

    def attention(prefix, weights, biases):
        (q_w, k_w, v_w), (q_b, k_b, v_b) = weights, biases
        # Whisper's key projection has no bias; CTranslate2 stores zeros in its place.
        if np.any(k_b != 0):
            sys.exit(f"{prefix}: the key bias is not zero, so this is not a Whisper model whisper.cpp can run")
        yield f"{prefix}.query.weight", q_w
        yield f"{prefix}.query.bias", q_b
        yield f"{prefix}.key.weight", k_w
        yield f"{prefix}.value.weight", v_w
        yield f"{prefix}.value.bias", v_b

    def block(prefix, ct2):
        yield from norm(f"{prefix}.attn_ln", f"{ct2}/self_attention/layer_norm")
        fused = f"{ct2}/self_attention/linear_0"
        yield from attention(f"{prefix}.attn", split(v[f"{fused}/weight"], 3), split(v[f"{fused}/bias"], 3))
        yield from linear(f"{prefix}.attn.out", f"{ct2}/self_attention/linear_1")
        yield from norm(f"{prefix}.mlp_ln", f"{ct2}/ffn/layer_norm")
        yield from linear(f"{prefix}.mlp.0", f"{ct2}/ffn/linear_0")
        yield from linear(f"{prefix}.mlp.2", f"{ct2}/ffn/linear_1")

    for conv in ("conv1", "conv2"):
        yield f"encoder.{conv}.weight", v[f"encoder/{conv}/weight"]
        yield f"encoder.{conv}.bias", v[f"encoder/{conv}/bias"].reshape(-1, 1)
    yield "encoder.positional_embedding", v["encoder/position_encodings/encodings"]
    for i in range(n_audio_layer):
        yield from block(f"encoder.blocks.{i}", f"encoder/layer_{i}")
    yield from norm("encoder.ln_post", "encoder/layer_norm")

    yield "decoder.token_embedding.weight", v["decoder/embeddings/weight"]
    yield "decoder.positional_embedding", v["decoder/position_encodings/encodings"]
    for i in range(n_text_layer):
        yield from block(f"decoder.blocks.{i}", f"decoder/layer_{i}")
        cross = f"decoder/layer_{i}/attention"
        yield from norm(f"decoder.blocks.{i}.cross_attn_ln", f"{cross}/layer_norm")
        k_w, v_w = split(v[f"{cross}/linear_1/weight"], 2)
        k_b, v_b = split(v[f"{cross}/linear_1/bias"], 2)
        q_w, q_b = v[f"{cross}/linear_0/weight"], v[f"{cross}/linear_0/bias"]
        yield from attention(f"decoder.blocks.{i}.cross_attn", (q_w, k_w, v_w), (q_b, k_b, v_b))
        yield from linear(f"decoder.blocks.{i}.cross_attn.out", f"{cross}/linear_2")
    yield from norm("decoder.ln", "decoder/layer_norm")


def layer_count(v, prefix):
    return sum(1 for name in v if name.startswith(prefix) and name.endswith("/ffn/linear_0/weight"))


def stays_f32(name, array):
    # convert-pt-to-ggml.py keeps these in float32, and whisper.cpp's loader expects them so.
    return array.ndim < 2 or name.endswith("conv1.bias") or name.endswith("conv2.bias") or name.endswith(
        "positional_embedding"
    )


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    model_dir, output = Path(sys.argv[1]), Path(sys.argv[2])
    v = read_ct2_model(model_dir / "model.bin")
    for name, array in v.items():
        if array.ndim >= 2 and array.dtype not in (np.float16, np.float32):
            sys.exit(f"{model_dir}: {name} is {array.dtype}: quantised models cannot be converted (use a float16 one)")
    n_audio_layer = layer_count(v, "encoder/")
    n_text_layer = layer_count(v, "decoder/")
    n_vocab, n_text_state = v["decoder/embeddings/weight"].shape
    n_text_ctx = v["decoder/position_encodings/encodings"].shape[0]
    n_audio_ctx, n_audio_state = v["encoder/position_encodings/encodings"].shape
    n_mels = v["encoder/conv1/weight"].shape[1]
    hparams = [
        n_vocab, n_audio_ctx, n_audio_state, int(v["encoder/num_heads"]), n_audio_layer,
        n_text_ctx, n_text_state, int(v["decoder/num_heads"]), n_text_layer, n_mels, GGML_FTYPE_F16,
    ]
    filters = mel_filters(n_mels)
    tokens = vocabulary(model_dir / "tokenizer.json")

    partial = output.with_name(output.name + ".partial")
    with partial.open("wb") as out:
        out.write(struct.pack("<12i", GGML_MAGIC, *hparams))
        out.write(struct.pack("<2i", *filters.shape))
        out.write(filters.tobytes())
        out.write(struct.pack("<i", len(tokens)))
        for token in tokens:
            out.write(struct.pack("<i", len(token)))
            out.write(token)
        count = 0
        for name, array in whisper_tensors(v, n_audio_layer, n_text_layer):
            f32 = stays_f32(name, array)
            data = np.ascontiguousarray(array, dtype=np.float32 if f32 else np.float16)
            encoded = name.encode("utf-8")
            out.write(struct.pack("<3i", data.ndim, len(encoded), 0 if f32 else 1))
            out.write(struct.pack(f"<{data.ndim}i", *reversed(data.shape)))
            out.write(encoded)
            out.write(data.tobytes())
            count += 1
    partial.replace(output)
    print(f"{output}: {count} tensors, {n_audio_layer}+{n_text_layer} layers, vocabulary {len(tokens)}/{n_vocab}")


if __name__ == "__main__":
    main()
