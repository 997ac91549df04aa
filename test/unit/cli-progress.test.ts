import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { ProgressLine, progressText } from "../../src/cli/progress.js";

/** A stand-in for stderr that records what is written; `tty` says whether it claims to be a terminal. */
function fakeStream(tty: boolean): { stream: NodeJS.WriteStream; written: () => string } {
  const stream = new PassThrough();
  let written = "";
  stream.on("data", (chunk: Buffer) => (written += chunk.toString()));
  Object.assign(stream, { isTTY: tty, columns: 80 });
  return { stream: stream as unknown as NodeJS.WriteStream, written: () => written };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("progressText", () => {
  it("draws a ten-cell bar, the percent and the detail", () => {
    expect(progressText(0, "Waiting")).toBe("[----------] 0% Waiting");
    expect(progressText(59, "Translating")).toBe("[#####-----] 59% Translating");
    expect(progressText(100, "Completed")).toBe("[##########] 100% Completed");
    expect(progressText(undefined, "0.1 MiB 2.0 MiB/s")).toBe("[----------] ?% 0.1 MiB 2.0 MiB/s");
  });
});

describe("ProgressLine", () => {
  it("writes each (stage, percent) once as a plain line when not on a terminal", async () => {
    const { stream, written } = fakeStream(false);
    const line = new ProgressLine(stream);
    line.note("job created");
    for (const [percent, stage] of [
      [0, "Waiting"],
      [0, "Waiting"],
      [42.9, "Translating"],
      [42.2, "Translating"],
      [150, "Completed"],
    ] as const) {
      line.update({ percent, stage });
    }
    line.end();
    await settle();
    expect(written()).toBe(
      "job created\n[----------] 0% Waiting\n[####------] 42% Translating\n[##########] 100% Completed\n",
    );
  });

  it("with plainStep 10 writes one plain line per tenth, whatever the detail", async () => {
    const { stream, written } = fakeStream(false);
    const line = new ProgressLine(stream, { plainStep: 10 });
    for (const percent of [undefined, undefined, 1, 9, 15, 100]) {
      line.update({ percent, detail: `at ${percent}` });
    }
    line.end();
    await settle();
    expect(written().split("\n")).toEqual([
      "[----------] ?% at undefined",
      "[----------] 1% at 1",
      "[#---------] 15% at 15",
      "[##########] 100% at 100",
      "",
    ]);
  });

  it("redraws one line in place on a terminal and ends it with a newline", async () => {
    const { stream, written } = fakeStream(true);
    const line = new ProgressLine(stream);
    line.update({ percent: 5, stage: "Uploading" });
    line.update({ percent: 100, stage: "Uploading" });
    line.note("job created");
    await settle();
    const out = written();
    expect(out).not.toContain("\n[");
    expect(out).toContain("[----------] 5% Uploading");
    expect(out.endsWith("[##########] 100% Uploading\u001b[0K\u001b8\njob created\n")).toBe(true);
  });
});
