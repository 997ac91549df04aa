/**
 * A small builder for ONNX models over `onnx-proto`, for the stand-in models the tests generate:
 * graphs with the input and output names, shapes and metadata the real models have, and weights that
 * mean nothing (see docs/testing.md, "Stand-in models").
 */
import onnxProto, { type onnx as Onnx } from "onnx-proto";

// onnx-proto is CommonJS: its namespace is a property of the default export.
const { onnx } = onnxProto;

export const DataType = onnx.TensorProto.DataType;
type ElementType = Onnx.TensorProto.DataType;

/** A dimension: a fixed size, or a name for a size chosen at run time ("N", "T"). */
export type Dim = number | string;

export function valueInfo(name: string, elemType: ElementType, dims: readonly Dim[]): Onnx.IValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType,
        shape: { dim: dims.map((d) => (typeof d === "number" ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

type AttributeValue = number | string | readonly number[] | readonly string[] | Onnx.ITensorProto;

function attribute(name: string, value: AttributeValue): Onnx.IAttributeProto {
  const A = onnx.AttributeProto.AttributeType;
  if (typeof value === "string") return { name, type: A.STRING, s: Buffer.from(value) };
  if (typeof value === "number")
    return Number.isInteger(value) ? { name, type: A.INT, i: value } : { name, type: A.FLOAT, f: value };
  if (Array.isArray(value)) {
    if (value.every((v) => typeof v === "string"))
      return { name, type: A.STRINGS, strings: value.map((v) => Buffer.from(v as string)) };
    return { name, type: A.INTS, ints: value as number[] };
  }
  return { name, type: A.TENSOR, t: value as Onnx.ITensorProto };
}

let nodeCount = 0;

/** One operator. Integer attribute values are INT, others FLOAT; `{ floats }` is not needed here. */
export function node(
  opType: string,
  inputs: readonly string[],
  outputs: readonly string[],
  attributes: Record<string, AttributeValue> = {},
): Onnx.INodeProto {
  return {
    opType,
    name: `${opType}_${nodeCount++}`,
    input: [...inputs],
    output: [...outputs],
    attribute: Object.entries(attributes).map(([name, value]) => attribute(name, value)),
  };
}

export function floatTensor(name: string, dims: readonly number[], data: Float32Array): Onnx.ITensorProto {
  return {
    name,
    dims: [...dims],
    dataType: DataType.FLOAT,
    rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
  };
}

export function int64Tensor(
  name: string,
  dims: readonly number[],
  data: readonly number[],
): Onnx.ITensorProto {
  const values = BigInt64Array.from(data, (v) => BigInt(v));
  return { name, dims: [...dims], dataType: DataType.INT64, rawData: new Uint8Array(values.buffer) };
}

/** `count` weights from a fixed-seed generator, uniform in [-scale, scale]: the same model every time. */
export function randomWeights(count: number, seed: number, scale = 0.1): Float32Array {
  const out = new Float32Array(count);
  let state = seed >>> 0 || 1;
  for (let i = 0; i < count; i++) {
    // xorshift32: cheap, deterministic, enough for weights that mean nothing.
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    out[i] = ((state >>> 0) / 0xffffffff - 0.5) * 2 * scale;
  }
  return out;
}

export interface ModelSpec {
  readonly name: string;
  readonly inputs: readonly Onnx.IValueInfoProto[];
  readonly outputs: readonly Onnx.IValueInfoProto[];
  readonly nodes: readonly Onnx.INodeProto[];
  readonly initializers?: readonly Onnx.ITensorProto[];
  /** The model's metadata_props, as the engine reads them (numbers written in decimal). */
  readonly metadata?: Readonly<Record<string, string | number>>;
  /** Default-domain opset; 13 unless a graph needs a later operator. */
  readonly opset?: number;
}

/** The serialized model (an `.onnx` file's bytes). */
export function encodeModel(spec: ModelSpec): Uint8Array {
  const model = onnx.ModelProto.create({
    irVersion: 8,
    producerName: "relay stand-in",
    opsetImport: [{ domain: "", version: spec.opset ?? 13 }],
    graph: {
      name: spec.name,
      input: [...spec.inputs],
      output: [...spec.outputs],
      node: [...spec.nodes],
      initializer: [...(spec.initializers ?? [])],
    },
    metadataProps: Object.entries(spec.metadata ?? {}).map(([key, value]) => ({ key, value: String(value) })),
  });
  return onnx.ModelProto.encode(model).finish();
}

/** Builds a graph a node at a time: each value gets a fresh name, each constant becomes an initializer. */
export class GraphBuilder {
  readonly nodes: Onnx.INodeProto[] = [];
  readonly initializers: Onnx.ITensorProto[] = [];
  private count = 0;
  private seed = 1;

  name(prefix: string): string {
    return `${prefix}_${this.count++}`;
  }

  /** Adds one single-output operator; returns its output's name. */
  op(opType: string, inputs: readonly string[], attributes: Record<string, AttributeValue> = {}): string {
    const output = this.name(opType);
    this.nodes.push(node(opType, inputs, [output], attributes));
    return output;
  }

  floats(prefix: string, dims: readonly number[], values: ArrayLike<number>): string {
    const name = this.name(prefix);
    this.initializers.push(floatTensor(name, dims, Float32Array.from(values)));
    return name;
  }

  ints(prefix: string, dims: readonly number[], values: readonly number[]): string {
    const name = this.name(prefix);
    this.initializers.push(int64Tensor(name, dims, values));
    return name;
  }

  /**
   * Random weights scaled for the fan-in, so activations neither vanish nor blow up over a deep
   * stack: ±1/√fanIn, or He's ±√(6/fanIn) in front of ReLUs.
   */
  weights(
    prefix: string,
    dims: readonly number[],
    fanIn: number,
    scaling: "fan-in" | "he" = "fan-in",
  ): string {
    const name = this.name(prefix);
    const count = dims.reduce((a, b) => a * b, 1);
    const scale = scaling === "he" ? Math.sqrt(6 / fanIn) : 1 / Math.sqrt(fanIn);
    this.initializers.push(floatTensor(name, dims, randomWeights(count, this.seed++, scale)));
    return name;
  }
}
