/**
 * The sources stay in files a reader can take in: none over 500 lines (import cycles and layer rules
 * are checked by dependency-cruiser in `npm run lint`, see .dependency-cruiser.mjs).
 */
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../support/run-script.js";

const MAX_LINES = 500;
const SOURCE_FILE = /\.(ts|js|mjs|cjs)$/u;

/** The source files under `dir` (relative to the project), dependencies and build output left out. */
async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(path.join(PROJECT_ROOT, dir), { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile() && SOURCE_FILE.test(entry.name))
    .map((entry) => path.relative(PROJECT_ROOT, path.join(entry.parentPath, entry.name)))
    .filter((file) => !file.split(path.sep).some((part) => part === "node_modules" || part === "dist"));
}

async function lineCount(file: string): Promise<number> {
  const text = await readFile(path.join(PROJECT_ROOT, file), "utf8");
  return text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
}

describe("source layout", () => {
  it(`keeps every source file at ${MAX_LINES} lines or fewer`, async () => {
    const packages = await readdir(path.join(PROJECT_ROOT, "packages")).catch(() => []);
    const files = (
      await Promise.all([
        sourceFiles("src"),
        // The workspace packages (packages/client), those with sources.
        ...packages.map((name) => sourceFiles(path.join("packages", name, "src")).catch(() => [])),
      ])
    ).flat();
    // The walk sees the sources (an empty list would pass vacuously).
    expect(files).toContain(path.join("src", "main.ts"));
    const counts = await Promise.all(files.map(async (file) => ({ file, lines: await lineCount(file) })));
    const tooLong = counts
      .filter(({ lines }) => lines > MAX_LINES)
      .map(({ file, lines }) => `${file}: ${lines}`);
    expect(tooLong).toEqual([]);
  });
});
