/**
 * Whether a file is a whole ONNX model with the graph inputs its engine feeds: a truncated or
 * foreign file otherwise fails deep inside onnxruntime, at the first request. Reads the file's
 * ModelProto (onnx-proto) without running anything.
 */
import { readFile } from "node:fs/promises";
import onnxProto from "onnx-proto";

// onnx-proto is CommonJS: its namespace is a property of the default export.
const { onnx } = onnxProto;

/** What an ONNX file's graph takes and gives, by name. */
export interface OnnxGraphSummary {
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
}

/** The graph's inputs and outputs, or why `file` (shown as `shown`) is not a whole ONNX model. */
export async function readOnnxGraph(file: string, shown: string): Promise<OnnxGraphSummary | string> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (error) {
    return `cannot read ${shown} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
  }
  let model: ReturnType<typeof onnx.ModelProto.decode>;
  try {
    model = onnx.ModelProto.decode(bytes);
  } catch (error) {
    return `${shown} is not a complete ONNX model (${(error as Error).message})`;
  }
  if (!model.graph?.node?.length) return `${shown} is not an ONNX model (it has no graph)`;
  return {
    inputs: (model.graph.input ?? []).map((input) => input.name ?? ""),
    outputs: (model.graph.output ?? []).map((output) => output.name ?? ""),
  };
}

/**
 * What keeps `file` from being an ONNX model that takes `inputs` (by name) and gives at least one
 * output, if anything; `engine` names who feeds it.
 */
export async function onnxModelProblem(
  file: string,
  shown: string,
  inputs: readonly string[],
  engine: string,
): Promise<string | undefined> {
  const graph = await readOnnxGraph(file, shown);
  if (typeof graph === "string") return graph;
  const missing = inputs.filter((input) => !graph.inputs.includes(input));
  if (missing.length > 0) return `${shown} lacks the inputs ${engine} feeds it: ${missing.join(", ")}`;
  if (graph.outputs.length === 0) return `${shown} has no output`;
  return undefined;
}
