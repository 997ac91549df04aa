/**
 * `relay models pull|verify` for sherpa-onnx voices, run as a child process against a local server
 * that serves archives laid out as upstream's (`vits-piper-<voice>/…` in a `.tar.bz2`), holding
 * stand-in models (test/support/stand-in-models/). Nothing here uses the network.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import onnxProto from "onnx-proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findSherpaModelOf } from "../../src/models/sherpa-catalogue.js";
import { installStandInVoice } from "../support/stand-in-models/install.js";
import { runScript, type Run } from "../support/run-script.js";

const execFileAsync = promisify(execFile);
const ENGLISH = findSherpaModelOf("tts", "piper-en_US-libritts_r-medium")!;
const SPANISH = findSherpaModelOf("tts", "piper-es_ES-sharvard-medium")!;

let server: Server;
let serverUrl: string;
let tmp: string;
const archives = new Map<string, Buffer>();
let ranges: (string | undefined)[] = [];

/** An upstream-style archive of a stand-in voice; `edit` may change the model's bytes first. */
async function archiveOf(name: string, edit?: (model: Buffer) => Uint8Array): Promise<Buffer> {
  const entry = findSherpaModelOf("tts", name)!;
  const root = await mkdtemp(path.join(tmp, "archive-"));
  const dir = await installStandInVoice(root, name, { speakers: 2 });
  // As Piper's model cards state a voice's licence.
  await writeFile(
    path.join(dir, "MODEL_CARD"),
    "# Model card\n\n## Dataset\n\n* URL: https://example.org/\n* License: CC BY 4.0\n",
  );
  if (edit) {
    const model = path.join(dir, entry.tts.model);
    await writeFile(model, edit(await readFile(model)));
  }
  const file = path.join(root, entry.file);
  await execFileAsync("tar", ["-cjf", file, "-C", root, entry.dir]);
  return readFile(file);
}

beforeAll(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "relay-cli-neural-"));
  archives.set(ENGLISH.file, await archiveOf(ENGLISH.name));
  // A model without the metadata sherpa-onnx requires (it would end the process that loads it).
  archives.set(
    SPANISH.file,
    await archiveOf(SPANISH.name, (bytes) => {
      const { onnx } = onnxProto;
      const model = onnx.ModelProto.decode(bytes);
      model.metadataProps = model.metadataProps.filter((entry) => entry.key !== "sample_rate");
      return onnx.ModelProto.encode(model).finish();
    }),
  );
  server = createServer((request, response) => {
    ranges.push(request.headers.range);
    const body = archives.get(path.basename(request.url ?? ""));
    if (!body) {
      response.writeHead(404).end();
      return;
    }
    const start = Number(/^bytes=(\d+)-$/u.exec(request.headers.range ?? "")?.[1] ?? 0);
    if (start > 0) {
      response.writeHead(206, {
        "content-length": body.length - start,
        "content-range": `bytes ${start}-${body.length - 1}/${body.length}`,
      });
    } else {
      response.writeHead(200, { "content-length": body.length });
    }
    response.end(body.subarray(start));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  serverUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}, 60_000);
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

const relay = (args: string[], dir: string): Promise<Run> =>
  runScript("src/cli/main.ts", ["models", ...args], { RELAY_MODELS_BASE_URL: serverUrl, MODELS_DIR: dir });

describe("relay models pull and verify: neural voices", () => {
  it("pulls, unpacks and verifies a voice; lists it as pulled; resumes an interrupted download", async () => {
    const dir = path.join(tmp, "models-ok");
    await mkdir(dir, { recursive: true });
    // Half an archive from an interrupted pull.
    const body = archives.get(ENGLISH.file)!;
    await writeFile(path.join(dir, `${ENGLISH.file}.partial`), body.subarray(0, Math.floor(body.length / 2)));
    ranges = [];
    const pulled = await relay(["pull", ENGLISH.name], dir);
    expect(pulled.code, pulled.stderr).toBe(0);
    expect(ranges).toEqual([`bytes=${Math.floor(body.length / 2)}-`]);
    expect(pulled.stdout).toMatch(
      /pulled piper-en_US-libritts_r-medium: .* resumed from .*SHA-256 [0-9a-f]{64} recorded/,
    );
    expect(pulled.stdout).toContain("licence, as its model card states it: CC BY 4.0");
    expect(existsSync(path.join(dir, ENGLISH.dir, ENGLISH.tts.model))).toBe(true);
    expect(existsSync(path.join(dir, ENGLISH.file))).toBe(false);

    const verified = await relay(["verify", ENGLISH.name], dir);
    expect(verified.code, verified.stderr).toBe(0);
    expect(verified.stdout).toMatch(/piper-en_US-libritts_r-medium\s+ok \(/);
    const listed = await relay(["list"], dir);
    expect(listed.stdout).toMatch(
      /piper-en_US-libritts_r-medium\s+tts\s+en\s+~75 MiB\s+yes\s+yes\s+CC BY 4.0/,
    );

    // A file changed after the pull fails verification.
    await writeFile(path.join(dir, ENGLISH.dir, ENGLISH.tts.tokens), "_ 0\n");
    const tampered = await relay(["verify", ENGLISH.name], dir);
    expect(tampered.code).toBe(1);
    expect(tampered.stdout).toMatch(/FAILED: checksum mismatch: tokens.txt has changed since it was pulled/);
  });

  it("refuses a voice whose model lacks the metadata sherpa-onnx needs, and keeps nothing of it", async () => {
    const dir = path.join(tmp, "models-bad");
    await mkdir(dir, { recursive: true });
    const result = await relay(["pull", SPANISH.name], dir);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/lacks the metadata sherpa-onnx requires of a vits model: sample_rate/);
    expect(existsSync(path.join(dir, SPANISH.dir))).toBe(false);
    expect(existsSync(path.join(dir, SPANISH.file))).toBe(false);
  });
});
